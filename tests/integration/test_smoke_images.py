"""Issue 5 in the docker tier: the suite in the e2e images, a wrong expectation, GPU checks without a GPU,
and an image torchyard did not build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import E2E
from kit import docker, torchyard

pytestmark = pytest.mark.docker


def _report(path: Path) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(path.read_text())["checks"]}


@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_the_pipeline_ran_the_suite_and_it_passed_without_gpu_checks(e2e: E2E, flavor: str) -> None:
    data = json.loads((e2e.out_dir / f"smoke-{flavor}.json").read_text())
    checks = {c["name"]: c for c in data["checks"]}
    assert data["summary"]["failed"] == 0
    assert all(c["status"] == "skipped" for name, c in checks.items() if name.startswith("gpu."))
    must_pass = [
        "version.torch",
        "version.cudnn",
        "version.nccl",
        "arch.torch",
        "arch.extensions",
        "libs.cuda",
        "import.torchvision",
        "import.torchaudio",
        "import.extensions",
        "train.cpu",
    ]
    assert [n for n in must_pass if checks[n]["status"] != "passed"] == []
    assert (checks["devel.nvcc"]["status"] == "passed") == (flavor == "devel")
    assert data["seconds"] < 90


def test_a_manifest_claiming_another_cudnn_fails_naming_the_mismatch(e2e: E2E, tmp_path: Path) -> None:
    out = tmp_path / "wrong.json"
    run = torchyard("smoke", e2e.ref("runtime"), "--expect-value", "cudnn=9.1.0.70", "--json", str(out))
    assert run.code == 1, run.text
    checks = _report(out)
    assert checks["version.cudnn"]["status"] == "failed"
    assert checks["version.cudnn"]["message"] == "cudnn: the image has 92400, expected 90100"
    assert checks["version.torch"]["status"] == "passed"


def test_gpu_checks_are_skipped_and_exit_0_only_without_require_gpu(e2e: E2E, tmp_path: Path) -> None:
    relaxed = torchyard(
        "smoke", e2e.ref("runtime"), "--json", str(tmp_path / "a.json"), "--junit", str(tmp_path / "a.xml")
    )
    assert relaxed.code == 0, relaxed.text
    gpu = {n: c for n, c in _report(tmp_path / "a.json").items() if n.startswith("gpu.")}
    assert gpu and all(c["status"] == "skipped" for c in gpu.values())
    assert "<skipped" in (tmp_path / "a.xml").read_text()
    strict = torchyard("smoke", e2e.ref("runtime"), "--require-gpu", "--json", str(tmp_path / "b.json"))
    assert strict.code == 1
    failed = {n: c for n, c in _report(tmp_path / "b.json").items() if c["status"] == "failed"}
    assert "gpu.devices" in failed and "--require-gpu" in failed["gpu.devices"]["message"]


def test_the_suite_runs_in_an_image_torchyard_did_not_build(foreign: str, tmp_path: Path) -> None:
    assert '"io.torchyard.version": ""' in docker("inspect", foreign).stdout
    assert docker("run", "--rm", foreign, "ls", "/etc/torchyard").returncode != 0
    bare = torchyard("smoke", foreign, "--json", str(tmp_path / "bare.json"))
    assert bare.code == 0, bare.text
    checks = _report(tmp_path / "bare.json")
    assert checks["version.torch"]["status"] == "skipped"  # nothing to compare against
    assert checks["import.torchvision"]["status"] == "passed"
    pinned = torchyard(
        "smoke",
        foreign,
        "--expect-value",
        "torch=2.14.1+cu130",
        "--arch",
        "sm_89",
        "--json",
        str(tmp_path / "pinned.json"),
    )
    assert pinned.code == 0, pinned.text
    checks = _report(tmp_path / "pinned.json")
    assert checks["version.torch"]["status"] == "passed"
    assert checks["arch.torch"]["message"] == "sm_89: compatible (sm_86)"
