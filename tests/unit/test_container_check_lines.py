"""`doctor --check`, line by line: what each answer of the probe (or its silence) makes of the CPU and GPU parts
and their problems, the container it is run in, and how an image that is not here is (not) checked. Written for
the survivors of `bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from host_kit import DOCKER_PLAIN, DOCKER_WITH_TOOLKIT, H100X2_580, SMI, SMI_BROKEN, FakeSystem, machine
from matrix_kit import real

import builder.host.container_check as cc
from builder.core.errors import EngineError, PushError
from builder.engine import ImageInfo
from builder.engine.interactive import ContainerSpec, Exited
from builder.host.container_check import (
    FAILED,
    MARKER,
    NOT_CHECKED,
    PASSED,
    PROBE,
    RUNTIME_FIX,
    ContainerCheck,
    Part,
    check_here,
    judge,
    probe_spec,
)
from builder.host.doctor import Diagnosis, Problem, diagnose
from builder.host.identity import Caller
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.host.system import Ran
from builder.resolve.query import RawQuery

ME = Caller(1000, 1000, "me")

M = real()
CPU_DETAIL = "an 8x8 matmul matches plain Python"
CPU_OK = {"ok": True, "detail": CPU_DETAIL}
CUDA_IMAGE = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.13.0", "nccl": "2.27.7", "cpu": CPU_OK}
H100 = "NVIDIA H100 80GB HBM3"
CDI_SPEC = {"/etc/cdi/nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"}


def doctor(system: FakeSystem, docker: dict[str, Any]) -> Diagnosis:
    return diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard")


def gpus() -> Diagnosis:
    return doctor(machine(H100X2_580, driver="580.65.06"), DOCKER_WITH_TOOLKIT)


def no_gpu() -> Diagnosis:
    return doctor(machine(None, toolkit=False), DOCKER_PLAIN)


def answer(seen: dict[str, Any]) -> Exited:
    return Exited(0, "noise\n" + MARKER + json.dumps(seen) + "\n")


def device(index: int, ok: bool = True) -> dict[str, Any]:
    return {"index": index, "name": H100, "ok": ok, "detail": "max error 0.0" if ok else "nan"}


def test_the_cpu_part_names_every_version_and_says_none_for_what_is_missing() -> None:
    full = judge(gpus(), "img", "", answer(CUDA_IMAGE | {"cuda_available": True, "devices": [device(0), device(1)]}))
    assert full.cpu == Part(PASSED, "torch 2.14.1+cu130, CUDA 13.0, cuDNN 9.13.0, NCCL 2.27.7; " + CPU_DETAIL)
    bare = judge(no_gpu(), "img", "", answer({"torch": "2.13.0+cpu", "cpu": {"ok": False}}))
    assert bare.cpu == Part(
        FAILED, "torch 2.13.0+cpu, CUDA none (a CPU build), cuDNN none, NCCL none; no CPU check ran"
    )


def test_torch_that_does_not_import_fails_the_cpu_part_with_its_error_and_leaves_the_gpus_unchecked() -> None:
    check = judge(gpus(), "img", "", answer({"error": "ImportError: libcudart.so.13", "cpu": CPU_OK}))
    assert check.cpu == Part(FAILED, "ImportError: libcudart.so.13")
    assert (check.gpu, check.problems) == (Part(NOT_CHECKED, "torch did not import"), [])


def test_without_a_gpu_the_gpu_part_says_why_from_the_driver_reading() -> None:
    check = judge(no_gpu(), "img", "", answer({"torch": "2.13.0+cpu", "cpu": CPU_OK}))
    why = "no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"
    assert check.gpu == Part(NOT_CHECKED, f"no GPU on this machine ({why})")


def test_without_a_gpu_the_gpu_part_names_every_driver_problem_or_says_none_was_found() -> None:
    broken = doctor(machine(SMI_BROKEN, smi_code=9, driver="580.65.06"), DOCKER_PLAIN)
    check = judge(broken, "img", "", answer({"torch": "2.13.0+cpu", "cpu": CPU_OK}))
    assert check.gpu.detail == f"no GPU on this machine ({'; '.join(broken.host.reading.problems)})"
    assert len(broken.host.reading.problems) == 2
    quiet = doctor(FakeSystem(commands={SMI: Ran(0, "")}), DOCKER_PLAIN)  # nvidia-smi lists nothing, no error
    check = judge(quiet, "img", "", answer({"torch": "2.13.0+cpu", "cpu": CPU_OK}))
    assert check.gpu.detail == "no GPU on this machine (no NVIDIA GPU found)"


def test_a_cpu_build_on_a_gpu_machine_fails_the_gpu_part_and_names_the_fix() -> None:
    check = judge(gpus(), "img", "", answer({"torch": "2.13.0+cpu", "cuda": None, "cpu": CPU_OK}))
    assert check.gpu == Part(FAILED, "the image's torch is a CPU build: it cannot use the GPUs here")
    fix = "run an image with a CUDA build (torchyard doctor names the one for this machine)"
    assert check.problems == [Problem("container-gpu", "torch 2.13.0+cpu in the image is a CPU build", fix)]


def test_a_container_without_the_gpus_names_the_flags_it_got_and_cuda_s_own_error() -> None:
    seen = CUDA_IMAGE | {"cuda_available": False, "cuda_error": "CUDA driver initialization failed"}
    check = judge(gpus(), "img", "", answer(seen))
    assert check.gpu == Part(FAILED, "torch.cuda.is_available() is False")
    message = (
        "this machine has 2 GPU(s) and the image's CUDA 13.0 build, but torch.cuda.is_available() is False in the "
        "container started with --gpus all (CUDA driver initialization failed)"
    )
    assert check.problems == [Problem("container-gpu", message, RUNTIME_FIX)]
    quiet = judge(gpus(), "img", "", answer(CUDA_IMAGE | {"cuda_available": False}))
    assert quiet.problems[0].message.endswith("started with --gpus all")


def test_a_container_without_the_gpus_names_the_cdi_flags_it_got_where_the_engine_uses_cdi() -> None:
    system = machine(H100X2_580, driver="580.65.06", toolkit=False, files=CDI_SPEC)
    d = doctor(system, {"ServerVersion": "28.3.0", "Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi"]})
    check = judge(d, "img", "", answer(CUDA_IMAGE | {"cuda_available": False}))
    assert check.problems[0].message.endswith("started with --device nvidia.com/gpu=all")


def test_each_wrong_gpu_a_missing_gpu_and_a_missing_nccl_are_problems_with_their_fixes() -> None:
    seen = CUDA_IMAGE | {"nccl": None, "cuda_available": True, "devices": [device(1, ok=False), "junk"]}
    check = judge(gpus(), "img", "", answer(seen))
    wrong = Problem(
        "container-gpu",
        f"GPU 1 ({H100}): nan",
        "see nvidia-smi and dmesg for this GPU; torchyard smoke IMAGE --gpus all runs the whole suite",
    )
    missing = Problem(
        "container-gpu", "the container sees 1 GPU(s), nvidia-smi 2", "check CUDA_VISIBLE_DEVICES and the --gpus flag"
    )
    nccl = Problem(
        "nccl",
        "no NCCL in torch 2.14.1+cu130: multi-GPU training will fail",
        "use an image whose torch has NCCL (every torchyard CUDA image has)",
    )
    assert check.problems == [wrong, missing, nccl]
    assert check.gpu == Part(FAILED, "; ".join(p.message for p in [wrong, missing, nccl]))


def test_every_gpu_right_passes_with_the_names_and_nccl() -> None:
    check = judge(gpus(), "img", "", answer(CUDA_IMAGE | {"cuda_available": True, "devices": [device(0), device(1)]}))
    detail = f"2 GPU(s) (0: {H100}, 1: {H100}); a matmul on each matches the CPU; NCCL 2.27.7"
    assert (check.gpu, check.problems) == (Part(PASSED, detail), [])


def test_a_silent_probe_keeps_its_exit_code_and_docker_s_last_error_line() -> None:
    output = "Unable to find image\nError response from daemon: first\nmore\nError response from daemon: last\nbye\n"
    check = judge(no_gpu(), "img", "docker run x", Exited(125, output))
    assert (check.image, check.command, check.exit_code, check.timed_out) == ("img", "docker run x", 125, False)
    assert check.cpu == Part(
        FAILED, "the probe exited 125 without the probe's answer: Error response from daemon: last"
    )
    assert check.gpu == Part(NOT_CHECKED, "the probe gave no answer")


def test_a_silent_probe_without_an_error_line_keeps_its_last_two_lines_at_most_300_characters() -> None:
    check = judge(no_gpu(), "img", "", Exited(1, "one\ntwo\nthree\n"))
    assert check.cpu.detail == "the probe exited 1 without the probe's answer: two three"
    long = judge(no_gpu(), "img", "", Exited(1, "x" * 400 + "\n" + "y" * 10))
    assert long.cpu.detail.endswith(": " + ("x" * 400 + " " + "y" * 10)[-300:])
    late = judge(no_gpu(), "img", "", Exited(-1, "", timed_out=True))
    assert (late.timed_out, late.cpu.detail) == (True, "the probe timed out")


def test_a_probe_line_that_is_not_an_object_is_no_answer() -> None:
    check = judge(no_gpu(), "img", "", Exited(0, MARKER + "[1, 2]\n"))
    assert check.cpu.status == FAILED and check.seen == {}


def test_the_probe_container_gets_the_gpu_flags_the_user_and_no_stdin() -> None:
    d = gpus()
    spec = probe_spec(d, "img", ME)
    assert (spec.image, spec.command, spec.gpu_flags, spec.user, spec.env, spec.interactive) == (
        "img", ("python3", "-c", PROBE.read_text()), ("--gpus", "all"), "1000:1000", ("USER=me", "LOGNAME=me"), False
    )  # fmt: skip
    assert spec.name.startswith("torchyard-check-")
    cdi = doctor(machine(H100X2_580, driver="580.65.06", toolkit=False), DOCKER_PLAIN | {"CDISpecDirs": ["/etc/cdi"]})
    cdi.runtime.cdi_specs = ("/etc/cdi/nvidia.yaml",)  # type: ignore[union-attr]
    assert probe_spec(cdi, "img", None).gpu_flags == ("--device", "nvidia.com/gpu=all")


class Engine:
    """The two engine calls check_here makes."""

    def __init__(self, here: bool, pull: Exception | None = None) -> None:
        self.here, self.pull_error = here, pull
        self.pulled: list[str] = []
        self.asked: list[str] = []

    def inspect(self, ref: str) -> ImageInfo | None:
        self.asked.append(ref)
        if self.pull_error is not None and isinstance(self.pull_error, EngineError):
            raise self.pull_error
        return ImageInfo(id="sha256:i", labels={}, tags=(ref,), digests=(), size=1) if self.here else None

    def pull(self, ref: str, auth: object) -> ImageInfo:
        self.pulled.append(ref)
        if self.pull_error is not None:
            raise self.pull_error
        return ImageInfo(id="sha256:i", labels={}, tags=(ref,), digests=(), size=1)


class Runs:
    """run_container: each answer in turn, and the specs it was given."""

    def __init__(self, *answers: Exited) -> None:
        self.answers = list(answers)
        self.specs: list[ContainerSpec] = []

    def __call__(self, spec: ContainerSpec, *, capture: bool = False, timeout: float | None = None) -> Exited:
        assert capture and timeout == 30
        self.specs.append(spec)
        return self.answers.pop(0)


def test_an_image_without_python3_is_probed_again_with_python(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(Exited(127, "exec: python3 not found"), answer({"torch": "2.13.0+cpu", "cpu": CPU_OK}))
    monkeypatch.setattr(cc, "run_container", runs)
    check = check_here(no_gpu(), "img", Engine(here=True), ME, 30, pull=False)
    assert [(s.command[0], s.user) for s in runs.specs] == [("python3", "1000:1000"), ("python", "1000:1000")]
    assert check.image == "img"
    assert check.cpu.status == PASSED
    assert check.command.startswith("docker run --rm --name torchyard-check-")
    assert check.command.endswith(
        " --user 1000:1000 -e HOME=/tmp -e USER=me -e LOGNAME=me img python -c <builder/smoke/runtime_probe.py>"
    )


@pytest.mark.parametrize("code", [126, 127])
def test_a_probe_that_answered_is_not_run_again_whatever_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    runs = Runs(Exited(code, MARKER + json.dumps({"torch": "2.13.0+cpu", "cpu": CPU_OK})))
    monkeypatch.setattr(cc, "run_container", runs)
    check_here(no_gpu(), "img", Engine(here=True), None, 30, pull=False)
    assert len(runs.specs) == 1


def test_a_probe_that_fails_otherwise_is_not_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(Exited(125, "Error response from daemon: no such image"))
    monkeypatch.setattr(cc, "run_container", runs)
    check = check_here(no_gpu(), "img", Engine(here=True), None, 30, pull=False)
    assert len(runs.specs) == 1 and check.exit_code == 125


def test_the_recommended_image_not_here_is_not_checked_and_its_build_line_is_given() -> None:
    d = no_gpu()
    assert d.recommended is not None
    image = d.recommended.image
    check = check_here(d, image, Engine(here=False), None, 30, pull=False)
    why = f"{image} is not in the local engine"
    detail = f"{why} (no --repo / TORCHYARD_REPO to pull it from): build it with `{d.recommended.build}`"
    assert check == ContainerCheck(image, "", cpu=Part(NOT_CHECKED, detail), gpu=Part(NOT_CHECKED, why))


def test_another_image_not_here_is_not_checked_without_a_build_line() -> None:
    check = check_here(no_gpu(), "other:1", Engine(here=False), None, 30, pull=False)
    assert check.cpu.detail == "other:1 is not in the local engine (no --repo / TORCHYARD_REPO to pull it from)"


def test_an_image_not_here_is_pulled_when_it_may_be_then_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(answer({"torch": "2.13.0+cpu", "cpu": CPU_OK}))
    monkeypatch.setattr(cc, "run_container", runs)
    engine = Engine(here=False)
    check = check_here(no_gpu(), "team/x:1", engine, None, 30, pull=True)
    assert engine.asked == ["team/x:1"] and engine.pulled == ["team/x:1"] and check.cpu.status == PASSED


def test_a_refused_pull_is_not_checked_with_the_registry_s_reason() -> None:
    engine = Engine(here=False, pull=PushError("denied: requested access to the resource is denied"))
    check = check_here(no_gpu(), "team/x:1", engine, None, 30, pull=True)
    assert engine.pulled == ["team/x:1"]
    assert (
        check.cpu.detail == "team/x:1 is not in the local engine (denied: requested access to the resource is denied)"
    )


def test_an_engine_error_is_an_unchecked_answer_not_a_failure() -> None:
    engine = Engine(here=False, pull=EngineError("Cannot connect to the Docker daemon"))
    check = check_here(no_gpu(), "img", engine, None, 30, pull=True)
    part = Part(NOT_CHECKED, "Cannot connect to the Docker daemon")
    assert check == ContainerCheck("img", "", cpu=part, gpu=part)
