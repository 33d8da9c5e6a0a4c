"""Issue 42: the image contract (builder/render/contract.py) against docs/contract.md, the hygiene checks on planted
image roots, the allowlist with expiry dates, and the host's hygiene.uid runs (builder/pipeline/uid_run.py)."""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from render_kit import plan, valid_combinations
from smoke_kit import context, outcome

from builder.core.errors import UsageError
from builder.engine import Isolation, Mount, RunResult
from builder.pipeline import uid_run
from builder.pipeline.hygiene_allowlist import current, expired, for_suite, read_hygiene_allowlist
from builder.pipeline.suite import SmokeReport
from builder.render import contract
from builder.smoke import checks_hygiene
from builder.smoke.framework import FAIL, PASS, SKIP, Result

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "contract.md"


def doc_rows(heading: str) -> list[list[str]]:
    """The table rows under a heading of docs/contract.md, each cell without its backquotes."""
    section = DOC.read_text().split(f"### {heading}\n", 1)[1].split("\n#", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip().replace("`", "") for cell in row] for row in rows[1:]]


def test_the_doc_states_the_contracts_version() -> None:
    assert f"**Contract version {contract.VERSION}.**" in DOC.read_text()


def test_the_docs_allowlist_tables_are_the_codes() -> None:
    top = [(name.strip(), why) for names, why in doc_rows("Top level of /") for name in names.split(",")]
    assert top == [(a.pattern, a.why) for a in contract.TOP_LEVEL]
    files = doc_rows("Files below /tmp, /var/tmp, /root and /home")
    base = [(a.pattern, "all", a.why) for a in contract.FILES]
    assert [tuple(row) for row in files] == base + [(a.pattern, "notebook", a.why) for a in contract.NOTEBOOK_FILES]
    assert [tuple(row) for row in doc_rows("Caches an image must not hold")] == [
        (a.pattern, a.why) for a in contract.CACHES
    ]


def test_the_in_image_suite_reads_what_the_contract_writes() -> None:
    assert checks_hygiene.CONTRACT == contract.PATH
    assert list(checks_hygiene.CACHES) == [a.pattern for a in contract.CACHES]
    assert str(contract.PROBE_UID) in checks_hygiene.HOST_RUN


def test_every_flavor_carries_its_contract() -> None:
    ident = next(c.id for c in valid_combinations() if "debian" in c.id and "cu" in c.id)
    p = plan(ident)
    files = dict(p.context_files)
    for target in p.targets:
        name = f"contract-{target.flavor.value}.json"
        assert f"COPY {name} /etc/torchyard/contract.json" in p.dockerfile
        found = json.loads(files[name])
        assert (found["contract"], found["flavor"], found["entrypoint"]) == (
            1,
            target.flavor.value,
            ["/usr/bin/tini", "--"],
        )
        assert "NVIDIA_REQUIRE_CUDA" in found["environment"] and found["licenses"] == contract.LICENSES
    notebook = json.loads(files["contract-notebook.json"])
    runtime = json.loads(files["contract-runtime.json"])
    assert notebook["user"] == {"name": "jovyan", "uid": 1000, "gid": 100, "home": "/home/jovyan"}
    assert notebook["any_uid"]["group"] == 100 and "/home/jovyan/work/*" in notebook["allow"]["files"]
    assert runtime["user"]["uid"] == 0 and runtime["any_uid"] == {"group": 0, "home": "/tmp", "tmpfs": ["/tmp:exec"]}
    assert not any("jovyan" in pattern for pattern in runtime["allow"]["files"])
    assert "    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin; \\\n" in p.dockerfile


def test_every_final_stage_writes_the_license_listing_in_its_cleanup_step() -> None:
    """The listing at the contract's path, by the venv's python without bytecode, from the inventory script bound
    from the context (so it is not in the image), in the RUN that already cleans apt's leftovers: no extra layer."""
    ident = next(c.id for c in valid_combinations() if "debian" in c.id and "cu" in c.id)
    p = plan(ident)
    assert contract.LICENSES == "/etc/torchyard/licenses.json"
    assert dict(p.context_files)[contract.LICENSES_SCRIPT] == (ROOT / "builder" / "image" / "inventory.py").read_bytes()
    step = (
        f"RUN --mount=type=bind,source=inventory.py,target=/tmp/inventory.py \\\n    set -eu; \\\n"
        f"    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin; \\\n"
        f"    /opt/venv/bin/python -B /tmp/inventory.py --licenses {contract.LICENSES}\n"
    )
    assert p.dockerfile.count(step) == len(p.targets) == p.dockerfile.count("COPY smoke /opt/torchyard/smoke")
    assert "RUN rm -rf /var/lib/apt" not in p.dockerfile


def test_the_doc_names_the_license_listings_path() -> None:
    section = DOC.read_text().split("## License listing\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{contract.LICENSES}`" in section and "not recorded" in section


# -- the checks on a planted image root ------------------------------------------------------------------------
@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An image root holding the runtime contract, the FHS folders and root's start-up files."""
    image = tmp_path / "image"
    for name in ("etc/torchyard", "tmp", "var/tmp", "root", "home", "usr", "workspace", "var/lib/apt/lists/partial"):
        (image / name).mkdir(parents=True, exist_ok=True)
    (image / "root" / ".bashrc").write_text("")
    (image / "var/lib/apt/lists/lock").write_text("")
    allow = {"top_level": [a.pattern for a in contract.TOP_LEVEL], "files": [a.pattern for a in contract.FILES]}
    planted = {
        "contract": 1,
        "allow": allow,
        "entrypoint": [],
        "interpreters": [],
        "caches": [a.pattern for a in contract.CACHES],
    }
    (image / "etc/torchyard/contract.json").write_text(json.dumps(planted))
    monkeypatch.setattr(checks_hygiene, "ROOT", str(image))
    return image


def test_a_clean_root_passes_and_a_planted_file_fails(root: Path, tmp_path: Path) -> None:
    assert outcome("hygiene.stray_files", context(tmp_path))[0] == PASS
    assert outcome("hygiene.caches", context(tmp_path))[0] == PASS
    (root / "tmp" / "planted.txt").write_text("x")
    (root / "vendor").mkdir()
    assert outcome("hygiene.stray_files", context(tmp_path)) == (
        FAIL,
        "2 path(s) outside the contract's allowlist: /vendor, /tmp/planted.txt",
    )
    ctx = context(tmp_path)
    ctx.accepted = {"hygiene.stray_files": ["/tmp/*", "/vendor"]}
    assert outcome("hygiene.stray_files", ctx)[0] == PASS


def test_without_a_contract_stray_files_is_not_checked(root: Path, tmp_path: Path) -> None:
    (root / "etc/torchyard/contract.json").unlink()
    assert outcome("hygiene.stray_files", context(tmp_path)) == (SKIP, checks_hygiene.NO_CONTRACT)


def test_caches_names_what_apt_and_pip_left(root: Path, tmp_path: Path) -> None:
    (root / "var/cache/apt/archives").mkdir(parents=True)
    (root / "root/.cache/pip/http").mkdir(parents=True)
    assert outcome("hygiene.caches", context(tmp_path))[0] == PASS  # an empty folder is no cache
    (root / "var/cache/apt/archives/bash_5.2_amd64.deb").write_text("")
    (root / "root/.cache/pip/http/0").write_text("")
    status, message = outcome("hygiene.caches", context(tmp_path))
    assert (status, message) == (
        FAIL,
        "2 cache path(s) left in the image: /root/.cache/pip/http, /var/cache/apt/archives/bash_5.2_amd64.deb",
    )


def test_pip_check_fails_on_a_broken_requirement_unless_accepted(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = "planted-broken 1.0 requires torchyard-not-there, which is not installed.\nWARNING: cache disabled"
    monkeypatch.setattr(checks_hygiene, "_run", lambda argv, timeout=60.0: (1, said))
    status, message = outcome("hygiene.pip_check", context(tmp_path))
    assert (status, message) == (FAIL, f"pip check: 1 broken requirement(s): {said.splitlines()[0]}")
    ctx = context(tmp_path)
    ctx.accepted = {"hygiene.pip_check": ["Planted_Broken"]}
    assert outcome("hygiene.pip_check", ctx) == (PASS, "pip check: no broken requirements (1 accepted: planted-broken)")
    monkeypatch.setattr(checks_hygiene, "_run", lambda argv, timeout=60.0: (1, "/venv/bin/python: No module named pip"))
    assert outcome("hygiene.pip_check", context(tmp_path))[0] == SKIP


def test_the_entrypoint_must_run(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = json.loads((root / "etc/torchyard/contract.json").read_text())
    planted["entrypoint"] = [str(root / "usr" / "tini"), "--"]
    (root / "etc/torchyard/contract.json").write_text(json.dumps(planted))
    status, message = outcome("hygiene.entrypoint", context(tmp_path))
    assert (status, message) == (FAIL, f"the entrypoint {root / 'usr' / 'tini'} is not an executable file")


def test_uid_is_left_to_the_host(tmp_path: Path) -> None:
    assert outcome("hygiene.uid", context(tmp_path)) == (SKIP, checks_hygiene.HOST_RUN)


# -- the allowlist ---------------------------------------------------------------------------------------------
def test_the_allowlist_counts_until_its_expiry(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    entry = {"package": "torchtext", "reason_to_ignore": "pinned by the old pipeline", "expiry": "2027-01-31"}
    path.write_text(json.dumps({"hygiene.pip_check": [entry, dict(entry, package="old", expiry="2026-01-01")]}))
    entries = read_hygiene_allowlist(path)
    today = datetime.date(2026, 12, 5)
    assert for_suite(current(entries, today)) == {"hygiene.pip_check": ["torchtext"]}
    assert [e.line() for e in expired(entries, today)] == [
        "hygiene.pip_check old (until 2026-01-01: pinned by the old pipeline)"
    ]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"hygiene.nope": []}, "'hygiene.nope' is not one of"),
        ({"hygiene.pip_check": [{"package": "x", "expiry": "2027-01-01"}]}, "no reason_to_ignore"),
        ({"hygiene.caches": [{"path": "/x", "reason_to_ignore": "r", "expiry": "soon"}]}, "is not a date"),
        ({"hygiene.caches": [{"reason_to_ignore": "r", "expiry": "2027-01-01"}]}, "no path"),
        ({"hygiene.caches": {"path": "/x"}}, "'hygiene.caches': expected a list of entries"),
        ({"hygiene.caches": ["/x"]}, "hygiene.caches[0]: expected an object"),
        ([{"path": "/x"}], "expected an object keyed by check name"),
    ],
)
def test_a_malformed_allowlist_is_refused_naming_the_entry(tmp_path: Path, doc: dict[str, Any], said: str) -> None:
    path = tmp_path / "allow.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError, match=re.escape(said)):
        read_hygiene_allowlist(path)


# -- hygiene.uid from the host ---------------------------------------------------------------------------------
@dataclass
class ProbeEngine:
    """Answers read_file with a contract and each run with the next of `outputs`; records the runs."""

    outputs: list[RunResult]
    runs: list[tuple[str | None, Isolation | None]] = field(default_factory=list)

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        return json.dumps({"any_uid": {"group": 0, "home": "/tmp", "tmpfs": ["/tmp:exec"]}}).encode()

    def run(self, image: str, command: list[str], **kwargs: Any) -> RunResult:
        self.runs.append((kwargs.get("user"), kwargs.get("isolation")))
        return self.outputs.pop(0)


def probe_said(*steps: tuple[str, str, str]) -> RunResult:
    return RunResult(0, "a warning\n" + json.dumps({"steps": [list(s) for s in steps]}))


def test_the_probe_runs_twice_as_1010_then_read_only() -> None:
    ok = probe_said(("import torch", PASS, "torch 2.15"), ("torch.compile", SKIP, "no C++ compiler"))
    engine = ProbeEngine([ok, ok])
    result = uid_run.probe(engine, "img", ["python", "/smoke"], (Mount("/h", "/smoke"),), 1.0)  # type: ignore[arg-type]
    assert result.status == PASS and "read-only, tmpfs /tmp:exec: import torch, torch.compile skipped" in result.message
    env = (("HOME", "/tmp"),)
    assert engine.runs == [
        ("1010:0", Isolation(environment=env)),
        ("1010:0", Isolation(environment=env, read_only=True, tmpfs=("/tmp:exec",))),
    ]


def test_a_probe_that_fails_fails_hygiene_uid_in_the_report() -> None:
    engine = ProbeEngine([RunResult(126, "exec /opt/venv/bin/python: permission denied")])
    result = uid_run.probe(engine, "img", ["python", "/smoke"], (), 1.0)  # type: ignore[arg-type]
    assert (result.status, result.message) == (
        FAIL,
        "as 1010:0 (HOME=/tmp): the probe exited 126 without a report: exec /opt/venv/bin/python: permission denied",
    )
    checks = [
        {"name": "hygiene.caches", "status": PASS, "message": "clean", "seconds": 0.1},
        {"name": "hygiene.uid", "status": SKIP, "message": checks_hygiene.HOST_RUN, "seconds": 0.0},
    ]
    data = {"checks": checks, "summary": {PASS: 1, FAIL: 0, SKIP: 1}, "seconds": 1.0}
    found = SmokeReport(0, data, "<x/>", "noise\nCHECK  RESULT  TIME  MESSAGE\nold table\n")
    assert uid_run.left_to_host(found.data)
    fields = uid_run.merged(found, Result("hygiene.uid", FAIL, "as 1010:0: no", 2.0))
    assert fields["exit_code"] == 1 and fields["data"]["summary"] == {PASS: 1, FAIL: 1, SKIP: 0}
    assert fields["output"].splitlines()[0] == "noise" and "hygiene.uid     FAILED" in fields["output"]
    assert 'name="hygiene.uid"' in fields["junit"]


def test_a_home_tmpfs_is_mounted_as_the_running_uid_and_tmp_as_it_is() -> None:
    from builder.pipeline.uid_run import _owned

    assert _owned("/home/jovyan", "1010:100") == "/home/jovyan:uid=1010,gid=100"
    assert _owned("/home/x:size=1m", "1010:0") == "/home/x:size=1m,uid=1010,gid=0"
    assert _owned("/tmp:exec", "1010:100") == "/tmp:exec"
