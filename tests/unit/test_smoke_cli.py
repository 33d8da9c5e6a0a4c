"""The smoke suite's command line (builder/smoke/cli.py) and its reports: exit codes, --only, JSON, JUnit.

The checks run in-process here (the worker machinery has its own tests in test_smoke_runner.py):
`run_all` is replaced by a loop over `run_one`, against fake torch modules that pass every check a
machine without a GPU can run.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from fake_torch import FakeImage, FakeTrainer, Installer, manifest
from fatbin_kit import container, sass, shared_library
from smoke_kit import CHECKS

from builder.smoke import checks_cpu, checks_hygiene, cli, report
from builder.smoke.expect import load
from builder.smoke.framework import FAIL, PASS, SKIP, Check, Context, Result
from builder.smoke.runner import run_one

GPU = [name for name, c in CHECKS.items() if c.gpu]
CPU = [name for name, c in CHECKS.items() if not c.gpu]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    scale: float


Smoke = Callable[..., Run]


@pytest.fixture
def smoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Smoke:
    """`smoke(*argv)` runs the suite's main() against a healthy fake image without a GPU."""
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "_C.so").write_bytes(shared_library(container(*sass(80, 86, 90))))
    Installer(monkeypatch)(FakeImage(torchvision_dir=str(tmp_path / "torchvision")))
    monkeypatch.setitem(sys.modules, "builder.smoke.model", FakeTrainer().module())
    monkeypatch.setattr(checks_cpu, "_loaded", lambda fragment: f"/venv/lib/{fragment}.9")
    monkeypatch.setattr(ctypes, "CDLL", lambda path: type("Lib", (), {"__getattr__": lambda s, n: int})())
    monkeypatch.setattr(shutil, "which", lambda name: None)
    _healthy_hygiene(monkeypatch, tmp_path / "image-root")
    default = tmp_path / "etc-torchyard-manifest.json"
    default.write_text(json.dumps(manifest()))
    monkeypatch.setattr(cli, "DEFAULT_MANIFEST", str(default))
    scales: list[float] = []

    def in_process(checks: list[Check], ctx: Context, scale: float = 1.0) -> list[Result]:
        scales.append(scale)
        return [run_one(c, ctx) for c in checks]

    monkeypatch.setattr(cli, "run_all", in_process)

    def run(*argv: str) -> Run:
        capsys.readouterr()
        code = cli.main(list(argv))
        return Run(code, capsys.readouterr().out, scales[-1])

    return run


def _healthy_hygiene(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """The hygiene checks look at an image root of the test's (a contract, nothing stray) and pip check passes."""
    (root / "etc" / "torchyard").mkdir(parents=True)
    contract = {"contract": 1, "allow": {"top_level": ["etc"], "files": []}, "entrypoint": [], "interpreters": []}
    (root / "etc" / "torchyard" / "contract.json").write_text(json.dumps(contract))
    monkeypatch.setattr(checks_hygiene, "ROOT", str(root))
    monkeypatch.setattr(checks_hygiene, "_run", lambda argv, timeout=60.0: (0, "No broken requirements found."))


def statuses(out: str) -> dict[str, str]:
    rows = [line.split() for line in out.splitlines()[1:-1]]
    return {row[0]: row[1] for row in rows}


def test_without_a_gpu_the_gpu_checks_are_skipped_and_the_run_passes(smoke: Smoke) -> None:
    r = smoke()
    assert r.code == 0
    found = statuses(r.out)
    assert list(found) == list(CHECKS)
    assert {found[name] for name in GPU} == {"SKIPPED"}
    assert found["version.cudnn"] == "PASSED" and found["arch.torch"] == "PASSED"
    skipped_cpu = sorted(name for name in CPU if found[name] == "SKIPPED")
    # the fake torch has no torch.compile, as torch 1.13 has not, and no torch.distributed, torch.profiler or
    # torch.use_deterministic_algorithms (the workflow checks run on real torch: test_smoke_workflows_torch.py);
    # the host has no onnxruntime (not an inference image: onnx.cpu skips; test_smoke_onnx_torch.py runs it), and
    # it is not a notebook image (notebook.server skips; the docker tier runs it)
    assert skipped_cpu == [
        "arch.extensions",
        "compile.cpu",
        "ddp.cpu",
        "determinism.cpu",
        "devel.nvcc",
        "hygiene.uid",  # run by the host (builder/pipeline/uid_run.py)
        "import.extensions",
        "notebook.server",
        "onnx.cpu",
        "profiler.cpu",
    ]
    assert r.out.splitlines()[-1] == f"{len(CPU) - 10} passed, 0 failed, {len(GPU) + 10} skipped"


def test_require_gpu_without_a_gpu_fails(smoke: Smoke) -> None:
    r = smoke("--require-gpu")
    assert r.code == 1
    assert {statuses(r.out)[name] for name in GPU} == {"FAILED"}
    assert "--require-gpu, but torch.cuda.is_available() is False" in r.out


def test_no_gpu_checks_leaves_them_out(smoke: Smoke) -> None:
    r = smoke("--no-gpu-checks", "--require-gpu")
    assert (r.code, list(statuses(r.out))) == (0, CPU)


def test_only_selects_checks_by_prefix_in_suite_order(smoke: Smoke) -> None:
    r = smoke("--only", "gpu.dev", "--only", "version.cu")
    assert list(statuses(r.out)) == ["version.cuda", "version.cudnn", "gpu.devices"]
    assert r.code == 0


@pytest.mark.parametrize("prefix", ["gpus", "", "version.torchx"])
def test_only_a_prefix_that_names_no_check_is_refused_in_one_line(
    smoke: Smoke, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        smoke("--only", "version.", "--only", prefix)
    assert exited.value.code == 2
    assert (
        capsys.readouterr().err.splitlines()[-1].endswith(f"error: --only {prefix!r}: no check's name starts with it")
    )


def test_a_manifest_claiming_another_cudnn_fails_naming_the_mismatch(smoke: Smoke, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps(manifest(cudnn="9.1.0.70")))
    r = smoke("--expect", str(other), "--only", "version.")
    assert r.code == 1
    assert statuses(r.out)["version.cudnn"] == "FAILED"
    assert "cudnn: the image has 92400, expected 90100" in r.out
    assert r.out.splitlines()[-1] == "7 passed, 1 failed, 0 skipped"


def test_an_expect_flag_overrides_the_default_manifest(smoke: Smoke) -> None:
    r = smoke("--expect-torch", "2.14.1+cu128", "--only", "version.torch")
    assert r.code == 1
    assert "torch: the image has 2.14.1+cu130, expected 2.14.1+cu128" in r.out


def test_without_any_manifest_versions_are_skipped(smoke: Smoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "DEFAULT_MANIFEST", "/nonexistent/manifest.json")
    r = smoke("--only", "version.", "--only", "arch.torch")
    assert r.code == 0
    assert set(statuses(r.out).values()) == {"SKIPPED"}


def test_timeout_scale_reaches_the_runner(smoke: Smoke) -> None:
    assert smoke("--only", "version.python", "--timeout-scale", "0.25").scale == 0.25


def test_json_report(smoke: Smoke, tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    r = smoke("--json", str(path), "--arch", "sm_90", "--only", "version.os", "--only", "arch.", "--only", "gpu.tf")
    data = json.loads(path.read_text())
    assert r.code == 0
    assert {k: data[k] for k in ("suite", "schema", "arch", "require_gpu", "summary")} == {
        "suite": "torchyard-smoke",
        "schema": 1,
        "arch": "sm_90",
        "require_gpu": False,
        "summary": {"passed": 3, "failed": 0, "skipped": 2},  # --only takes prefixes: arch. is three checks
    }
    assert data["expectations"] == str(tmp_path / "etc-torchyard-manifest.json")
    assert data["python"] == sys.version.split()[0] and isinstance(data["seconds"], float)
    assert [(c["name"], c["status"], c["message"]) for c in data["checks"]] == [
        ("version.os", PASS, checks_cpu.os_name()),
        ("arch.torch", PASS, "sm_90: native"),
        ("arch.torchvision", PASS, "sm_90: native"),
        ("arch.extensions", SKIP, "the image declares no extensions"),
        ("gpu.tf32", SKIP, "no GPU visible"),
    ]
    assert all(set(c) == {"name", "status", "message", "seconds", "details"} for c in data["checks"])
    assert data["observed"]["os"] == checks_cpu.os_name()
    assert data["observed"]["arch_verdicts"] == {"torch": ["sm_90: native"], "torchvision": ["sm_90: native"]}


def test_junit_report(smoke: Smoke, tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    r = smoke("--junit", str(path), "--require-gpu", "--only", "version.python", "--only", "gpu.devices")
    assert r.code == 1
    suite = ElementTree.parse(path).getroot()
    assert (suite.tag, suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        "testsuite",
        "torchyard-smoke",
        "2",
        "1",
        "0",
    )
    passed, failed = suite.findall("testcase")
    assert (passed.get("classname"), passed.get("name")) == ("smoke", "version.python")
    assert [child.tag for child in passed] == ["system-out"]
    assert failed.get("name") == "gpu.devices"
    failure = failed.find("failure")
    assert failure is not None and failure.text == failure.get("message")
    assert str(failure.text).startswith("--require-gpu, but torch.cuda.is_available() is False")


def test_junit_marks_skipped_checks(smoke: Smoke, tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    assert smoke("--junit", str(path), "--only", "gpu.").code == 0
    suite = ElementTree.parse(path).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (str(len(GPU)), "0", str(len(GPU)))
    for case in suite.findall("testcase"):
        assert [(child.tag, child.get("message")) for child in case] == [("skipped", "no GPU visible")]


def test_the_summary_table() -> None:
    results = [
        Result("version.torch", PASS, "2.14.1+cu130", 0.04),
        Result("gpu.devices", SKIP, "no GPU visible", 0.0),
        Result("train.cpu", FAIL, "loss went 2.7 -> 2.6", 41.96),
    ]
    assert report.table(results) == (
        "CHECK          RESULT      TIME  MESSAGE\n"
        "version.torch  PASSED      0.0s  2.14.1+cu130\n"
        "gpu.devices    SKIPPED     0.0s  no GPU visible\n"
        "train.cpu      FAILED     42.0s  loss went 2.7 -> 2.6\n"
        "1 passed, 1 failed, 1 skipped"
    )


def test_junit_escapes_messages() -> None:
    text = report.as_junit([Result("x", FAIL, 'a <b> & "c"', 1.0)], 1.0)
    failure = ElementTree.fromstring(text).find("testcase/failure")
    assert failure is not None and (failure.get("message"), failure.text) == ('a <b> & "c"', 'a <b> & "c"')


def test_json_rounds_times(tmp_path: Path) -> None:
    ctx = Context(expect=load(None, {}), arch=None, require_gpu=True)
    data: dict[str, Any] = report.as_json([Result("x", PASS, "ok", 1.23456)], ctx, 2.3456)
    assert (data["seconds"], data["checks"][0]["seconds"], data["expectations"]) == (2.35, 1.235, "none")
