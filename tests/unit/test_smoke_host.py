"""builder/pipeline/suite.py, the host side of the smoke suite, against a fake engine (no Docker).

The fake's `run` plays the container: it finds the host folder mounted at /torchyard-out and writes
smoke.json / junit.xml there, as `python /opt/torchyard/smoke --json ... --junit ...` would.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from builder.core.errors import BuildError
from builder.engine import BuildRequest, EngineInfo, ImageInfo, Isolation, Mount, RegistryAuth, RunResult
from builder.pipeline.suite import HOST_SMOKE, IN_IMAGE_SMOKE, MOUNTED_SMOKE, OUT, SmokeOptions, run_smoke

REPORT: dict[str, Any] = {
    "suite": "torchyard-smoke",
    "summary": {"passed": 1, "failed": 1, "skipped": 1},
    "observed": {"torch": "2.14.1+cu130"},
    "checks": [
        {"name": "version.torch", "status": "passed", "message": "2.14.1+cu130"},
        {"name": "version.cudnn", "status": "failed", "message": "cudnn: the image has 92400, expected 90100"},
        {"name": "gpu.devices", "status": "skipped", "message": "no GPU visible"},
    ],
}


@dataclass(frozen=True)
class Call:
    image: str
    command: list[str]
    mounts: tuple[Mount, ...]
    gpus: str | None
    timeout: float
    out_mode: int  # permissions of the folder mounted at /torchyard-out


Container = Callable[[Call, Path], RunResult]  # what one `docker run` does, given the host output folder


def writes(report: dict[str, Any] | None = REPORT, junit: str | None = "<testsuite/>", code: int = 1) -> Container:
    def container(call: Call, out: Path) -> RunResult:
        if report is not None:
            (out / "smoke.json").write_text(json.dumps(report))
        if junit is not None:
            (out / "junit.xml").write_text(junit)
        return RunResult(code, "CHECK  RESULT ...\n1 passed, 1 failed, 1 skipped\n")

    return container


def exits(code: int, output: str = "", timed_out: bool = False) -> Container:
    return lambda call, out: RunResult(code, output, timed_out=timed_out)


@dataclass
class FakeEngine:
    """Only `run` is used by run_smoke; the rest of the Engine protocol refuses."""

    containers: list[Container]
    calls: list[Call] = field(default_factory=list)

    def run(
        self,
        image: str,
        command: list[str],
        *,
        mounts: tuple[Mount, ...] = (),
        gpus: str | None = None,
        timeout: float = 1800,
        user: str | None = None,
        isolation: Isolation | None = None,
    ) -> RunResult:
        out = Path(next(m.source for m in mounts if m.target == OUT))
        call = Call(image, list(command), mounts, gpus, timeout, stat.S_IMODE(os.stat(out).st_mode))
        self.calls.append(call)
        return self.containers.pop(0)(call, out)

    def info(self) -> EngineInfo:
        raise NotImplementedError

    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str:
        raise NotImplementedError

    def inspect(self, ref: str) -> ImageInfo | None:
        raise NotImplementedError

    def tag(self, image_id: str, ref: str) -> None:
        raise NotImplementedError

    def untag(self, ref: str) -> None:
        raise NotImplementedError

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        raise NotImplementedError

    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo:
        raise NotImplementedError

    def history(self, ref: str) -> list[str]:
        raise NotImplementedError

    def save(self, ref: str, path: Path) -> None:
        raise NotImplementedError

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        raise NotImplementedError


def test_the_suite_in_the_image_writes_its_report_to_the_mounted_folder() -> None:
    engine = FakeEngine([writes()])
    report = run_smoke(engine, "img:1", SmokeOptions(), in_image=True)
    (call,) = engine.calls
    assert call.command == ["python", IN_IMAGE_SMOKE, "--json", f"{OUT}/smoke.json", "--junit", f"{OUT}/junit.xml"]
    assert [(m.target, m.read_only) for m in call.mounts] == [(OUT, False)]
    assert call.out_mode == 0o777  # the suite may run as the image's non-root user
    assert (call.image, call.gpus, call.timeout) == ("img:1", None, 1800)
    assert (report.exit_code, report.ok, report.data, report.junit) == (1, False, REPORT, "<testsuite/>")
    assert report.failures() == ["version.cudnn: cudnn: the image has 92400, expected 90100"]
    assert report.observed.torch == "2.14.1+cu130" and len(report.checks) == 3
    assert report.observed.to_dict() == {"torch": "2.14.1+cu130"}
    assert report.output.endswith("1 passed, 1 failed, 1 skipped\n")
    out = next(m.source for m in call.mounts if m.target == OUT)
    assert not Path(out).exists()  # the temporary folder is gone


@pytest.mark.parametrize(("in_image", "host_copy"), [(False, False), (True, True), (False, True)])
def test_the_host_copy_is_mounted_read_only_into_other_images(in_image: bool, host_copy: bool) -> None:
    engine = FakeEngine([writes(code=0)])
    assert run_smoke(engine, "pytorch/pytorch", SmokeOptions(use_host_copy=host_copy), in_image=in_image).ok
    (call,) = engine.calls
    assert call.command[1] == MOUNTED_SMOKE
    assert Mount(str(HOST_SMOKE), MOUNTED_SMOKE, read_only=True) in call.mounts
    assert (HOST_SMOKE / "__main__.py").is_file()


def test_options_become_flags(tmp_path: Path) -> None:
    expect = tmp_path / "m.json"
    expect.write_text("{}")
    options = SmokeOptions(
        arch="sm_90",
        gpus="all",
        require_gpu=True,
        expect={"torch": "2.5.1+cu124", "cudnn": "9.1.0.70"},
        expect_file=expect,
        only=("version.", "gpu.devices"),
        timeout=60,
    )
    engine = FakeEngine([writes()])
    run_smoke(engine, "img", options, in_image=True)
    (call,) = engine.calls
    assert call.command[6:] == [
        "--expect",
        "/torchyard-expect.json",
        "--arch",
        "sm_90",
        "--require-gpu",
        "--expect-cudnn",
        "9.1.0.70",
        "--expect-torch",
        "2.5.1+cu124",
        "--only",
        "version.",
        "--only",
        "gpu.devices",
    ]
    assert Mount(str(expect.resolve()), "/torchyard-expect.json", read_only=True) in call.mounts
    assert (call.gpus, call.timeout) == ("all", 60)


def test_an_image_without_python_is_retried_with_python3() -> None:
    engine = FakeEngine([exits(127, "exec: python: not found"), writes(code=0)])
    report = run_smoke(engine, "img", SmokeOptions(arch="sm_89"), in_image=True)
    assert report.ok
    assert [c.command[0] for c in engine.calls] == ["python", "python3"]
    assert engine.calls[0].command[1:] == engine.calls[1].command[1:]
    assert engine.calls[0].mounts == engine.calls[1].mounts


def test_python3_missing_too_is_an_error_naming_the_image() -> None:
    engine = FakeEngine([exits(127), exits(127, "exec: python3: not found")])
    with pytest.raises(BuildError, match=r"^smoke suite in img exited 127 without a report: exec: python3: not found$"):
        run_smoke(engine, "img", SmokeOptions(), in_image=True)


def test_a_missing_report_raises_build_error_with_the_output_tail() -> None:
    output = "x" * 1000 + "ModuleNotFoundError: No module named 'torch'\n"
    engine = FakeEngine([exits(1, output)])
    with pytest.raises(BuildError) as caught:
        run_smoke(engine, "foreign:latest", SmokeOptions(), in_image=False)
    message = str(caught.value)
    assert message.startswith("smoke suite in foreign:latest exited 1 without a report: xxx")
    assert message.endswith("ModuleNotFoundError: No module named 'torch'")
    assert len(message) < 700  # only the last 600 characters of the output
    assert len(engine.calls) == 1  # only 127 is retried


def test_a_run_that_timed_out_raises_even_with_a_partial_report() -> None:
    def partial(call: Call, out: Path) -> RunResult:
        writes()(call, out)
        return RunResult(-1, "train.cpu ...", timed_out=True)

    with pytest.raises(BuildError, match=r"^smoke suite in img timed out: train\.cpu \.\.\.$"):
        run_smoke(FakeEngine([partial]), "img", SmokeOptions(timeout=5), in_image=True)


def test_a_report_without_junit() -> None:
    report = run_smoke(FakeEngine([writes(junit=None, code=0)]), "img", SmokeOptions(), in_image=True)
    assert (report.ok, report.junit) == (True, "")
