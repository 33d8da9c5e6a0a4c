"""Issue 6 in the docker tier: publishing a set of real images to a real registry, reruns, one changed
input, a failing smoke suite, the registry going away mid-run, and Ctrl-C.

The registry here (:5002, no auth) serves the storage of the e2e registry (:5001), and the images go
to the e2e repository: their layers are already there, so each push moves manifests, not gigabytes.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import E2E, RUN_ID
from kit import CI_DIR, ROOT, Run, default_sigint, docker, torchyard

from builder.pipeline.registry import Registry, parse_repo

pytestmark = pytest.mark.docker

PORT = 5002
_BASE_SET = """
[[publish]]
name = "pair"
torch = "==2.15.0"
os = ["debian13"]
flavors = ["runtime", "devel"]
"""


def _matrix(tmp: Path, name: str, publish: str) -> Path:
    text = (ROOT / "matrix.toml").read_text()
    text = text[: text.index("[[publish]]")] + publish
    path = tmp / f"{name}.toml"
    path.write_text(text)
    return path


class LocalRegistry:
    """docker-registry on :5002 over the e2e registry's storage; stop() and start() mid-test."""

    def __init__(self, folder: Path) -> None:
        self.config = folder / "registry.yml"
        self.config.write_text(
            "version: 0.1\n"
            f"storage: {{filesystem: {{rootdirectory: {CI_DIR / 'registry-auth-data'}}}, delete: {{enabled: true}}}}\n"
            f"http: {{addr: 127.0.0.1:{PORT}}}\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(50):
            try:
                requests.get(f"http://127.0.0.1:{PORT}/v2/", timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.2)
        raise AssertionError("registry on :5002 did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, e2e: E2E) -> Iterator[LocalRegistry]:
    served = LocalRegistry(tmp_path_factory.mktemp("registry"))
    served.start()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def repo(e2e: E2E) -> str:
    return f"127.0.0.1:{PORT}/" + e2e.repo.split("/", 1)[1]


def publish(matrix: Path, repo: str, out: Path, *extra: str) -> tuple[Run, dict[str, Any]]:
    report = out / "report.json"
    run = torchyard(
        "--matrix", str(matrix), "publish", "--repo", repo, "-o", str(out / "work"), "--report", str(report), *extra
    )
    data = json.loads(report.read_text()) if report.exists() else {}
    return run, data


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {i["id"]: i["status"] for i in data["items"]}


def _digest(reader: Registry, ref: str) -> str:
    repo, tag = ref.rsplit(":", 1)
    found = reader.client.manifest(parse_repo(repo), tag)
    assert found is not None, ref
    return found.digest


def aliases(data: dict[str, Any]) -> dict[str, str]:
    return {a["alias"]: a["status"] for a in data["aliases"]}


PAIR = {"torch2.15.0-cu132-py3.13-debian13-runtime", "torch2.15.0-cu132-py3.13-debian13-devel"}


@pytest.fixture(scope="module")
def first(
    tmp_path_factory: pytest.TempPathFactory, registry: LocalRegistry, repo: str
) -> tuple[Path, Run, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("publish")
    matrix = _matrix(tmp, "pair", _BASE_SET)
    run, data = publish(matrix, repo, tmp, "--jobs", "2")
    return matrix, run, data


def test_a_set_is_built_smoke_tested_and_pushed_then_aliases_move(
    first: tuple[Path, Run, dict[str, Any]], repo: str
) -> None:
    _, run, data = first
    assert run.code == 0, run.text[-3000:]
    assert statuses(data) == dict.fromkeys(PAIR, "built")
    # torch 2.15.0 cu132 is the newest torch and PyPI's default variant on the default OS and Python: latest-* too
    assert aliases(data) == {"2.15-cuda13.2-runtime": "moved", "2.15-cuda13.2-devel": "moved",
                             "latest-runtime": "moved", "latest-devel": "moved"}  # fmt: skip
    reader = Registry()
    for item in data["items"]:
        labels = reader.labels(item["ref"])
        assert labels is not None and labels["io.torchyard.combination"] == "torch2.15.0-cu132-py3.13-debian13"
        assert item["smoke"]["failed"] == 0
    assert reader.labels(f"{repo}:2.15-cuda13.2-devel") == reader.labels(
        next(i["ref"] for i in data["items"] if i["id"].endswith("-devel"))
    )
    for alias in aliases(data):  # registry-side moves: each alias is its image's manifest, digest for digest
        flavor = alias.rsplit("-", 1)[1]
        image = next(i["ref"] for i in data["items"] if i["id"].endswith(f"-{flavor}"))
        assert _digest(reader, f"{repo}:{alias}") == _digest(reader, image), alias
    for item in data["items"]:  # and each pushed image under its never-rewritten build tag, <tag>-<YYYYMMDD>
        assert re.fullmatch(re.escape(item["ref"]) + r"-20\d{6}", item["build_tag"]), item
        assert _digest(reader, item["build_tag"]) == _digest(reader, item["ref"])
        assert f"build tag {item['build_tag']} (never rewritten)" in run.out


def test_a_rerun_skips_everything_in_seconds(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    matrix, _, _ = first
    start = time.monotonic()
    run, data = publish(matrix, repo, tmp_path)
    assert run.code == 0, run.text[-2000:]
    assert statuses(data) == dict.fromkeys(PAIR, "skipped")
    assert set(aliases(data).values()) == {"unchanged"}
    assert time.monotonic() - start < 30


def test_turning_on_the_gate_judges_what_is_published_and_fails_without_a_build(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """Issue 44 item 4: the gate reaches skipped images, from the SBOM published with them (read registry-side);
    these were published without --attest, so it is not checked, so not passed: exit 4, nothing built or pulled,
    every alias held where it was."""
    matrix, _, _ = first
    reader = Registry()
    before = {alias: _digest(reader, f"{repo}:{alias}") for alias in aliases(first[2])}
    run, data = publish(matrix, repo, tmp_path, "--security-gate")
    assert run.code == 4, run.text[-2000:]
    assert statuses(data) == dict.fromkeys(PAIR, "failed")
    for item in data["items"]:
        assert item["reason"] == (
            f"security gate not checked: {item['ref']} has no SBOM attached (publish with --attest or --sign-key); "
            "not checked, so not passed"
        )
        assert (item["build_seconds"], item["pushed_bytes"]) == (0.0, 0)
    assert set(aliases(data).values()) == {"held"}
    assert {alias: _digest(reader, f"{repo}:{alias}") for alias in before} == before
    assert "building" not in run.out


def test_docker_buildx_bake_runs_the_exported_bake_file_and_every_step_is_the_published_build_s(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """Issue 43 item 4: `matrix ci --format bake` of the set just published, run by `docker buildx bake` (output
    cache-only: no tag is touched): it builds, and every RUN and COPY step is CACHED, i.e. the bake file builds
    exactly what publish built (same Dockerfile, context, args) rather than something of its own."""
    matrix, _, _ = first
    out = tmp_path / "bake"
    run = torchyard("--matrix", str(matrix), "matrix", "ci", "--format", "bake", "--repo", repo, "-o", str(out))
    assert run.code == 0, run.text[-2000:]
    argv = [
        "buildx",
        "bake",
        "-f",
        str(out / "docker-bake.json"),
        "--progress=plain",
        "--set",
        "*.output=type=cacheonly",
    ]
    done = docker(*argv, timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    steps = dict(re.findall(r"^#(\d+) \[[^\]]+\] ((?:RUN|COPY) .{0,80})", log, re.MULTILINE))
    cached = set(re.findall(r"^#(\d+) CACHED$", log, re.MULTILINE))
    assert steps, log[-2000:]
    assert {n: step for n, step in steps.items() if n not in cached} == {}


def test_changing_one_input_rebuilds_only_the_affected_image(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    changed = _matrix(
        tmp_path,
        "changed",
        _BASE_SET.replace('flavors = ["runtime", "devel"]', 'flavors = ["runtime"]')
        + '\n[[publish]]\nname = "devel-plus"\ntorch = "==2.15.0"\nos = ["debian13"]\n'
        'flavors = ["devel"]\npip = ["six==1.16.0"]\n',
    )
    run, data = publish(changed, repo, tmp_path)
    assert run.code == 0, run.text[-2000:]
    assert statuses(data) == dict.fromkeys(PAIR, "built") | {"torch2.15.0-cu132-py3.13-debian13-runtime": "skipped"}


def test_an_image_that_cannot_pass_stops_only_its_image(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """require_archs sm_61 on a torch without Pascal code: refused at plan time (matrix.toml records the code list),
    before any build; the in-image arch check is the fake engine's (tests/unit/test_pipeline.py)."""
    pascal = (
        _BASE_SET + '\n[[publish]]\nname = "pascal-too"\ntorch = "==2.15.0"\nos = ["debian13"]\n'
        'flavors = ["runtime"]\narchs = ["sm_89"]\nrequire_archs = ["sm_61"]\n'
    )
    run, data = publish(_matrix(tmp_path, "pascal", pascal), repo, tmp_path)
    assert run.code == 4  # an image failed: the README's code (the rest went on)
    failed = "torch2.15.0-cu132-py3.13-debian13-runtime-sm89"
    assert statuses(data) == dict.fromkeys(PAIR, "skipped") | {failed: "failed"}
    reason = next(i["reason"] for i in data["items"] if i["id"] == failed)
    assert reason.startswith("require_archs sm_61: torch 2.15.0+cu132 carries no code for it ("), reason
    assert Registry().labels(f"{repo}:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-sm89") is None
    assert "2.15-cuda13.2-runtime-sm89" not in aliases(data)  # its group was refused before planning tags


def test_the_registry_going_away_mid_run_fails_cleanly_and_a_rerun_finishes(
    first: tuple[Path, Run, dict[str, Any]], registry: LocalRegistry, repo: str, tmp_path: Path
) -> None:
    two = (
        _BASE_SET + '\n[[publish]]\nname = "sm89"\ntorch = "==2.15.0"\nos = ["debian13"]\nflavors = ["runtime"]\n'
        'archs = ["sm_89"]\n'
    )
    matrix = _matrix(tmp_path, "two", two)
    argv = [
        sys.executable,
        "-m",
        "builder",
        "--matrix",
        str(matrix),
        "publish",
        "--repo",
        repo,
        "--jobs",
        "1",
        "-o",
        str(tmp_path / "work"),
        "--report",
        str(tmp_path / "r1.json"),
    ]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if re.match(r"(SKIP|OK  )\s+torch2.15.0-cu132-py3.13-debian13-devel", line):
            registry.stop()  # the pair is done; the sm89 group still has to talk to the registry
    proc.wait(timeout=1800)
    registry.start()
    data = json.loads((tmp_path / "r1.json").read_text())
    assert proc.returncode == 4, "".join(lines)[-3000:]
    sm89 = "torch2.15.0-cu132-py3.13-debian13-runtime-sm89"
    assert statuses(data)[sm89] == "failed" and "unreachable" in next(
        i["reason"] for i in data["items"] if i["id"] == sm89
    )
    assert aliases(data)["2.15-cuda13.2-runtime-sm89"] == "held"
    run, again = publish(matrix, repo, tmp_path / "again")
    assert run.code == 0, run.text[-2000:]
    assert statuses(again) == dict.fromkeys(PAIR, "skipped") | {sm89: "built"}
    assert aliases(again)["2.15-cuda13.2-runtime-sm89"] == "moved"


def test_sigterm_in_the_smoke_suite_leaves_nothing_unverified_and_a_rerun_finishes(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """Issue 44 item 7: SIGTERM (a cancelled CI job) while the smoke suite runs is handled as Ctrl-C: exit 143, the
    suite's container removed, no alias moved, the report written, nothing pushed; the rerun finishes. (Ctrl-C
    itself: tests/integration/test_build_faults.py and the unit tier.)"""
    fresh = "pip-install-test==0.5"
    extra = _BASE_SET.replace('flavors = ["runtime", "devel"]', 'flavors = ["runtime"]') + f'pip = ["{fresh}"]\n'
    matrix = _matrix(tmp_path, "sigterm", extra.replace('name = "pair"', f'name = "sigterm-{RUN_ID}"'))
    report = tmp_path / "report.json"
    argv = [sys.executable, "-m", "builder", "--matrix", str(matrix), "publish", "--repo", repo]
    argv += ["-o", str(tmp_path / "work"), "--report", str(report)]
    default_sigint()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    owner = f"io.torchyard.run-by=*:{proc.pid}"
    log = tmp_path / "work" / f"sigterm-{RUN_ID}__torch2.15.0-cu132-py3.13-debian13" / "publish.log"
    for _ in range(1200):
        if log.exists() and "smoke suite (" in log.read_text() and _containers(proc.pid):
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    assert _containers(proc.pid), f"no smoke container of {owner} was seen running"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert _containers(proc.pid) == [], "the smoke suite's container was left behind"
    data = json.loads(report.read_text())
    assert [i["status"] for i in data["items"]] == ["failed"] and not data["items"][0].get("digest")
    assert {a["status"] for a in data["aliases"]} <= {"held"}
    tags = requests.get(f"http://127.0.0.1:{PORT}/v2/{repo.split('/', 1)[1]}/tags/list", timeout=10).json()["tags"]
    run, again = publish(matrix, repo, tmp_path / "again")
    assert run.code == 0, run.text[-2000:]
    assert list(statuses(again).values()) == ["built"]
    pushed = next(i["ref"] for i in again["items"]).rsplit(":", 1)[1]
    assert pushed not in tags  # stopped before it was verified: it was not there before the rerun


def _containers(pid: int) -> list[str]:
    """Every container (running or not) that the torchyard process `pid` started, by its owner label."""
    listed = subprocess.run(
        ["docker", "ps", "-a", "--format", '{{.ID}} {{.Label "io.torchyard.run-by"}}'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return [line.split()[0] for line in listed if line.strip().endswith(f":{pid}")]


def _layers(ref: str) -> dict[str, int]:
    """Layer digest -> size of the image under ref, from the registry's manifest."""
    host, rest = ref.split("/", 1)
    name, tag = rest.rsplit(":", 1)
    accept = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
    manifest = requests.get(f"http://{host}/v2/{name}/manifests/{tag}", headers={"Accept": accept}, timeout=30)
    manifest.raise_for_status()
    return {layer["digest"]: int(layer["size"]) for layer in manifest.json()["layers"]}


def test_a_refresh_token_rebuilds_with_an_apt_upgrade_under_the_same_tags(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """Last but one in this module: it replaces the pair's images (same tags, new content hash), reusing every
    layer below the upgrade, and attaches their SBOMs (the next test compares with them)."""
    matrix, _, before = first
    token = f"test-{RUN_ID}"
    old = {i["id"]: _layers(i["ref"]) for i in before["items"]}
    run, data = publish(matrix, repo, tmp_path, "--refresh", token, "--attest")  # SBOMs: the next test compares
    assert run.code == 0, run.text[-3000:]
    assert statuses(data) == dict.fromkeys(PAIR, "built")
    assert {i["id"]: i["ref"] for i in data["items"]} == {i["id"]: i["ref"] for i in before["items"]}
    for item in data["items"]:
        labels = Registry().labels(item["ref"])
        assert labels is not None and labels["io.torchyard.refresh"] == token
    assert set(aliases(data).values()) == {"moved"}
    for item in data["items"]:  # the os and venv layers are reused: the registry gets the upgrade and above
        now = _layers(item["ref"])
        big = {digest for digest, size in old[item["id"]].items() if size > 300_000_000}
        assert big and big <= set(now), "the venv layer was rebuilt"
        gone = sum(size for digest, size in old[item["id"]].items() if digest not in now)
        # runtime: nothing above the upgrade but two small COPYs; devel: its toolchain layers (~210 MB)
        assert gone < (50_000_000 if item["id"].endswith("-runtime") else 300_000_000), gone
    log = next((tmp_path / "work").rglob("build-runtime.log")).read_text()
    assert "Calculating upgrade" in log, "the os stage ran apt-get upgrade"
    again, same = publish(matrix, repo, tmp_path / "again", "--refresh", token)
    assert again.code == 0 and statuses(same) == dict.fromkeys(PAIR, "skipped")


def test_a_refresh_that_changes_no_package_keeps_every_digest_and_a_planted_change_is_listed(
    first: tuple[Path, Run, dict[str, Any]], repo: str, tmp_path: Path
) -> None:
    """Issue 44 item 3, last in this module (after the refresh above attached SBOMs): a new token whose upgrade
    changes no package pushes nothing and leaves every tag of the repository on its digest. Then an SBOM planted
    for the published runtime image says its libc6 was older (this test cannot make the archive publish an update):
    the next refresh publishes that image under a new build tag, its report lists libc6, and no build tag that
    existed before names another digest."""
    matrix, _, _ = first
    before = _tags(repo)
    run, data = publish(matrix, repo, tmp_path / "same", "--refresh", f"same-{RUN_ID}", "--attest")
    assert run.code == 0, run.text[-3000:]
    assert statuses(data) == dict.fromkeys(PAIR, "skipped")
    assert {i["refresh"]["packages"] for i in data["items"]} == {"unchanged"}
    assert _tags(repo) == before, "a refresh that changed no package moved a tag"
    runtime = next(i["ref"] for i in data["items"] if i["id"].endswith("-runtime"))
    version = _plant_older_libc6(runtime)
    run, data = publish(matrix, repo, tmp_path / "planted", "--refresh", f"planted-{RUN_ID}", "--attest",
                        "--only", "*-runtime")  # fmt: skip
    assert run.code == 0, run.text[-3000:]
    [item] = data["items"]
    assert item["status"] == "built" and item["build_tag"] and item["build_tag"].split(":")[-1] not in before
    changes = [(c["name"], c["old"], c["new"]) for c in item["refresh"]["changes"]]
    assert ("libc6", f"{version}~planted", version) in changes, item["refresh"]
    builds = {tag: digest for tag, digest in before.items() if re.search(r"-\d{8}(\.\d+)?$", tag)}
    after = _tags(repo)
    assert builds and {tag: after.get(tag) for tag in builds} == builds, "an earlier build tag was rewritten"


def _tags(repo: str) -> dict[str, str]:
    """Every tag of the repository and the digest it names (the referrers' sha256-<hex> tags left out)."""
    host, name = repo.split("/", 1)
    listed = requests.get(f"http://{host}/v2/{name}/tags/list", timeout=30)
    listed.raise_for_status()
    reader = Registry()
    tags = [t for t in listed.json().get("tags") or [] if not t.startswith("sha256-")]
    return {tag: _digest(reader, f"{repo}:{tag}") for tag in tags}


def _plant_older_libc6(ref: str) -> str:
    """An altered copy of the SBOM of the image under ref, listed first in its referrers tag (what a refresh reads):
    libc6 one version back. Returns libc6's real version."""
    from builder.oci.client import OCI_INDEX
    from builder.oci.referrers import attach, referrers_tag
    from builder.trust import sbom
    from builder.trust.attest import read_attached

    reader, (repo_text, _) = Registry(), ref.rsplit(":", 1)
    repo, manifest = parse_repo(repo_text), reader.read(ref)
    assert manifest is not None
    found = read_attached(reader.client, repo, manifest.digest, sbom.MEDIA_TYPE)
    assert found is not None, f"{ref} has no SBOM"
    data = json.loads(found[1])
    libc6 = next(c for c in data["components"] if c["name"] == "libc6" and c["purl"].startswith("pkg:deb/"))
    version, libc6["version"] = libc6["version"], libc6["version"] + "~planted"
    planted = attach(reader.client, repo, manifest, sbom.MEDIA_TYPE, json.dumps(data).encode(), {})
    index = reader.client.manifest(repo, referrers_tag(manifest.digest))
    assert index is not None, "this registry has no referrers API: its referrers tag lists the SBOMs"
    entries = sorted(index.data["manifests"], key=lambda e: e["digest"] != planted.digest)
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    reader.client.put_manifest(repo, referrers_tag(manifest.digest), raw, OCI_INDEX)
    return str(version)
