"""docs/schemas.md and the JSON the commands print agree: every key path the document lists for a command is in
that command's output, and every document starts with its schema version."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_engine import Contents, FakeEngine
from host_kit import DOCKER_WITH_TOOLKIT, H100X2_580, RTX4090_535, machine
from matrix_kit import real

import builder.engine
from builder.cli.doctor_cmd import as_data
from builder.cli.main import main
from builder.core.kinds import AliasStatus, Status
from builder.engine import ImageInfo
from builder.host.doctor import diagnose
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.pipeline.multiplatform import IndexResult
from builder.publish.report import ItemResult, Report
from builder.publish.zstd_copies import ZstdResult
from builder.resolve.facts import Facts
from builder.resolve.query import RawQuery

DOC = Path(__file__).resolve().parents[2] / "docs" / "schemas.md"
_PATH = re.compile(r"^[a-z_]+(?:\[\])?(?:\.[a-z_]+(?:\[\])?)*$")
M = real()


def sections() -> dict[str, list[str]]:
    """Heading (the command, as written) -> the key paths its table lists."""
    found: dict[str, list[str]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = []
        elif current and line.startswith("| `"):
            first = line.split("|")[1]
            found[current] += [p for p in re.findall(r"`([^`]+)`", first) if _PATH.match(p)]
    return found


def documented_schema(heading: str) -> int:
    """The number in the section's `schema` row: a command whose meaning changed says so with a new version."""
    text = DOC.read_text().split(f"## {heading}\n", 1)[1]
    found = re.search(r"^\| `schema` \| (\d+)", text, re.M)
    assert found, heading
    return int(found[1])


def has_path(data: Any, path: str) -> bool:
    head, _, rest = path.partition(".")
    listed = head.endswith("[]")
    key = head.removesuffix("[]")
    if not isinstance(data, dict) or key not in data:
        return False
    value = data[key]
    if listed:
        if not isinstance(value, list) or not value:
            return False
        return all(has_path(item, rest) for item in value) if rest else True
    return has_path(value, rest) if rest else True


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    with pytest.raises(SystemExit):
        main(list(argv))
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _doctor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    system = machine(RTX4090_535, driver="535.104.05")
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    return as_data(d, Facts(M))


def _doctor_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    """Two GPUs here, one seen in the container (a problem): every key of the check has a value to show."""
    from builder.cli.check_view import check_data
    from builder.engine.interactive import Exited
    from builder.host.container_check import MARKER, judge

    system = machine(H100X2_580, driver="580.65.06")
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(), "torchyard")
    device = {"index": 0, "name": "H100", "ok": True, "detail": ""}
    seen = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.13.0", "nccl": "2.27.7", "cuda_available": True,
            "cpu": {"ok": True, "detail": "ok"}, "devices": [device]}  # fmt: skip
    check = judge(d, "img", "docker run ...", Exited(0, MARKER + json.dumps(seen)))
    return as_data(d, Facts(M)) | {"check": check_data(check)}


def _inspect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    observed = {"torch": "2.5.1+cu124", "cuda": "12.4", "cudnn": 90100, "nccl": "2.21.5", "python": "3.11",
                "os": "ubuntu22.04", "torch_arch_list": ["sm_80", "sm_86", "sm_90"]}  # fmt: skip
    fake = FakeEngine({"probe": Contents({}, observed)})
    fake.images["sha256:f"] = ImageInfo(id="sha256:f", labels={}, tags=(), digests=(), size=1)
    fake.tags["other/torch:1"] = "sha256:f"
    fake.built_target["sha256:f"] = "probe"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builder.engine, "DockerEngine", lambda: fake)
        return cli(capsys, "inspect", "other/torch:1", "--driver", "550", "--gpu", "RTX 4090", "--json")


def _publish_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    items = [ItemResult("torch2.14.1-cu130-py3.11-debian12-runtime", Status.BUILT, "r:t", reason="")]
    members = {"linux/amd64": "sha256:" + "1" * 64, "linux/arm64": "sha256:" + "2" * 64}
    index = IndexResult("2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime", AliasStatus.MOVED, "sha256:" + "3" * 64,
                        members=members)  # fmt: skip
    copies = [ZstdResult("2.14.1-cu130-py3.11-debian12-runtime", "written", "r:t-zstd", "sha256:" + "4" * 64, "", 9, 7)]
    return Report(items, [], 1.0, [index], copies).as_json()


def _build_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    from fake_engine import FakeRegistry, contents_of
    from render_kit import plan

    import builder.cli.build_cmd
    import builder.pipeline.pipeline

    registry = FakeRegistry()
    fake = FakeEngine(contents_of(plan("torch2.14.1-cu130-py3.11-debian12")), registry=registry)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builder.cli.build_cmd, "DockerEngine", lambda: fake)
        patch.setattr(builder.pipeline.pipeline, "Registry", lambda auth: registry)
        with pytest.raises(SystemExit):
            main(["build", "--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12",
                  "--no-host-settings", "--repo", "127.0.0.1:5000/t", "-o", str(tmp_path / "out")])  # fmt: skip
    data: dict[str, Any] = json.loads((tmp_path / "out" / "build-report.json").read_text())
    return data


def _manifest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    """The image's manifest as the build fills it: the plan's, with each layer's packages."""
    from render_kit import plan

    manifest = plan("torch2.14.1-cu130-py3.11-debian12").targets[0].manifest.to_dict()
    for layer in manifest["layers"]:
        layer["packages"] = ["some-distribution==1.0"]
    return manifest


def _verify(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    from http_kit import Net
    from matrix_kit import BASE
    from upstream_kit import Upstream

    (tmp_path / "matrix.toml").write_text(BASE)
    net = Upstream.recorded().attach(Net())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("requests.Session", net.session)
        patch.setattr("builder.net.http.time.sleep", net.waits.append)
        return cli(
            capsys,
            "--matrix",
            str(tmp_path / "matrix.toml"),
            "matrix",
            "verify",
            "--only",
            "torch,companions",
            "--json",
        )


def _outdated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    """The real matrix without torch 2.0.0, against PyPI's recorded torch page: one finding with a release missing."""
    from http_kit import Net
    from test_outdated import REAL, pypi

    start = REAL.index('[[torch]]\nversion = "2.0.0"')
    (tmp_path / "matrix.toml").write_text(REAL[:start] + REAL[REAL.index("[[torch]]", start + 1) :])
    net = Net().on(pypi)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("requests.Session", net.session)
        patch.setattr("builder.net.http.time.sleep", net.waits.append)
        matrix = str(tmp_path / "matrix.toml")
        return cli(capsys, "--matrix", matrix, "matrix", "outdated", "--only", "torch", "--json")


def _promote(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    import docker  # imported before requests.Session is patched: its API client subclasses the real one
    from http_kit import Net
    from registry_kit import MemoryRegistry

    assert docker
    net = Net()
    from registry_kit import tar_of

    MemoryRegistry("127.0.0.1:5000").attach(net).add_gzip_image("team/cand", "t1", [tar_of("a", 1000)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("requests.Session", net.session)
        patch.setenv("DOCKER_CONFIG", str(tmp_path))
        return cli(capsys, "promote", "127.0.0.1:5000/team/cand:t1", "127.0.0.1:5000/team/pub:t1", "--zstd", "--json")


def _verify_image(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    from test_trust_registry import FACTS, RP, _target
    from trust_kit import registry, write_key

    from builder.trust.attest import TrustSettings, attest
    from builder.trust.keys import signing_key

    memory, client = registry()
    attest(_target(memory, client), TrustSettings(key=signing_key(write_key(tmp_path), {})), FACTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("builder.oci.client.Distribution", lambda **_: client)
        return cli(capsys, "verify-image", f"{RP}:t1", "--key", str(tmp_path / "key.pem.pub"), "--json")


RUNNERS: dict[str, Callable[[pytest.CaptureFixture[str], Path], dict[str, Any]]] = {
    "`torchyard lookup --json`": lambda c, t: cli(c, "lookup", "--driver", "535", "--gpu", "RTX 4090", "--json"),
    "`torchyard explain --json`": lambda c, t: cli(c, "explain", "--gpu", "RTX 4090", "--json"),
    "`torchyard doctor --json`": _doctor,
    "`torchyard doctor --check [IMAGE] --json`": _doctor_check,
    "`torchyard inspect IMAGE --json`": _inspect,
    "`torchyard matrix show KIND NAME --json`": lambda c, t: cli(c, "matrix", "show", "torch", "2.14.1", "--json"),
    "`torchyard matrix list --json`": lambda c, t: cli(c, "matrix", "list", "--json"),
    "`torchyard matrix check --json`": lambda c, t: cli(c, "matrix", "check", "--json"),
    "`torchyard matrix publish --json`": lambda c, t: cli(c, "matrix", "publish", "--json"),
    "`torchyard render --json` (and plan.json)": lambda c, t: cli(c, "render", "-o", str(t / "r"), "--json"),
    "`torchyard build` (`<out>/build-report.json`)": _build_report,
    "The image manifest (`/etc/torchyard/manifest.json`, `manifest` of plan.json)": _manifest,
    "`torchyard publish --report FILE`": _publish_report,
    "`torchyard matrix verify --json`": _verify,
    "`torchyard matrix outdated --json`": _outdated,
    "`torchyard promote SRC DST --json`": _promote,
    "`torchyard verify-image REF --json`": _verify_image,
}


def test_every_documented_command_is_tested() -> None:
    assert set(sections()) == set(RUNNERS)


def test_a_path_the_output_lacks_is_caught() -> None:
    data = {"schema": 1, "results": [{"id": "a"}, {"id": "b", "torch": "2"}], "reasons": []}
    assert has_path(data, "results[].id")
    assert not has_path(data, "results[].torch")  # one element lacks it
    assert not has_path(data, "reasons[].reason")  # an empty list proves nothing
    assert not has_path(data, "total")


@pytest.mark.parametrize("heading", list(RUNNERS))
def test_the_output_has_every_documented_key(heading: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = RUNNERS[heading](capsys, tmp_path)
    assert next(iter(data)) == "schema" and data["schema"] == documented_schema(heading)
    paths = sections()[heading]
    assert paths, heading
    missing = [p for p in paths if not has_path(data, p)]
    assert missing == [], heading
