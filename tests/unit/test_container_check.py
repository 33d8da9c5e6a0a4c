"""`doctor --check`: the probe (builder/smoke/runtime_probe.py) run by real CPU torch, with and without simulated
GPUs (tests/gpu_sim), and the judge that sets what it saw beside doctor's static answer on recorded machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from host_kit import DOCKER_PLAIN, DOCKER_WITH_TOOLKIT, H100X2_580, FakeSystem, machine
from matrix_kit import real
from sim_kit import H100, needs_torch, python_with_torch, sim

from builder.engine.interactive import Exited
from builder.host.container_check import MARKER, PROBE, judge, probe_spec
from builder.host.doctor import Diagnosis, diagnose
from builder.host.identity import Caller
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()


def doctor(system: FakeSystem, docker: dict[str, Any]) -> Diagnosis:
    return diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard")


def answer(**seen: Any) -> Exited:
    """What the container printed: some noise, then the probe's line."""
    return Exited(0, "a warning from the image\n" + MARKER + json.dumps(seen) + "\n")


CPU_OK = {"ok": True, "detail": "an 8x8 matmul matches plain Python"}
CUDA_IMAGE = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.13.0", "nccl": "2.27.7", "cpu": CPU_OK}


def gpu(index: int, ok: bool = True) -> dict[str, Any]:
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "ok": ok, "detail": "max error 0.0" if ok else "nan"}


def test_without_a_gpu_the_cpu_part_passes_and_the_gpu_part_is_not_checked() -> None:
    d = doctor(machine(None, toolkit=False), DOCKER_PLAIN)
    seen: dict[str, Any] = {"torch": "2.13.0+cpu", "cuda": None, "cpu": CPU_OK, "cuda_available": False, "devices": []}
    check = judge(d, "img", "docker run ...", answer(**seen))
    assert (check.cpu.status, check.gpu.status) == ("passed", "not checked")
    assert check.cpu.detail.startswith("torch 2.13.0+cpu, CUDA none (a CPU build)")
    assert check.gpu.detail.startswith("no GPU on this machine (no NVIDIA driver")
    assert check.problems == []
    assert probe_spec(d, "img", Caller(1000, 1000, "me")).gpu_flags == ()


def test_static_runs_but_the_container_sees_no_gpu_is_a_problem_naming_the_toolkit() -> None:
    d = doctor(machine(H100X2_580, driver="580.65.06"), DOCKER_WITH_TOOLKIT)
    check = judge(d, "img", "docker run ...", answer(**CUDA_IMAGE, cuda_available=False, devices=[]))
    assert (check.cpu.status, check.gpu.status) == ("passed", "failed")
    (problem,) = check.problems
    assert problem.check == "container-gpu"
    assert "this machine has 2 GPU(s)" in problem.message and "started with --gpus all" in problem.message
    assert "nvidia-ctk runtime configure --runtime=docker" in problem.fix and "nvidia-ctk cdi generate" in problem.fix


def test_every_gpu_seen_and_its_matmul_right_passes_one_wrong_fails() -> None:
    d = doctor(machine(H100X2_580, driver="580.65.06"), DOCKER_WITH_TOOLKIT)
    good = judge(d, "img", "", answer(**CUDA_IMAGE, cuda_available=True, devices=[gpu(0), gpu(1)]))
    assert (good.gpu.status, good.problems) == ("passed", [])
    assert good.gpu.detail.startswith("2 GPU(s) (0: NVIDIA H100 80GB HBM3, 1: NVIDIA H100 80GB HBM3)")
    bad = judge(d, "img", "", answer(**CUDA_IMAGE, cuda_available=True, devices=[gpu(0), gpu(1, ok=False)]))
    assert bad.gpu.status == "failed"
    assert [p.message for p in bad.problems] == ["GPU 1 (NVIDIA H100 80GB HBM3): nan"]
    one = judge(d, "img", "", answer(**dict(CUDA_IMAGE, nccl=None), cuda_available=True, devices=[gpu(0)]))
    assert {p.check for p in one.problems} == {"container-gpu", "nccl"}  # 1 GPU seen of 2, no NCCL


def test_no_answer_from_the_probe_fails_the_cpu_part_and_leaves_the_gpu_part_unchecked() -> None:
    d = doctor(machine(None, toolkit=False), DOCKER_PLAIN)
    check = judge(d, "img", "", Exited(127, 'exec: "python": executable file not found in $PATH'))
    assert (check.cpu.status, check.gpu.status) == ("failed", "not checked")
    assert check.cpu.detail.startswith("the probe exited 127 without the probe's answer: exec:")
    late = judge(d, "img", "", Exited(-1, "", timed_out=True))
    assert late.cpu.detail == "the probe timed out"


def _probe(config: dict[str, Any] | None, tmp_path: Path) -> dict[str, Any]:
    code = PROBE.read_text()
    out = python_with_torch(code, config, tmp_path) if config else python_with_torch(code, {"gpus": []}, tmp_path)
    (line,) = [x for x in out.splitlines() if x.startswith(MARKER)]
    found: dict[str, Any] = json.loads(line[len(MARKER) :])
    return found


@needs_torch
def test_the_probe_in_real_cpu_torch_sees_its_cpu_and_no_gpu(tmp_path: Path) -> None:
    seen = _probe(None, tmp_path)
    assert seen["torch"].endswith("+cpu") and seen["cuda"] is None and seen["nccl"] is None
    assert seen["cpu"]["ok"] is True
    assert (seen["cuda_available"], seen["device_count"], seen["devices"]) == (False, 0, [])


@needs_torch
def test_the_probe_runs_a_matmul_on_every_simulated_gpu_and_catches_a_wrong_one(tmp_path: Path) -> None:
    seen = _probe(sim([H100, H100], faults=("gpu:1",)), tmp_path)
    assert (seen["cuda"], seen["cudnn"], seen["nccl"]) == ("13.0", "9.24.0", "2.27.3")
    assert (seen["cuda_available"], seen["device_count"]) == (True, 2)
    assert [(x["index"], x["name"], x["ok"]) for x in seen["devices"]] == [
        (0, "Simulated NVIDIA H100", True),
        (1, "Simulated NVIDIA H100", False),  # device 1 computes NaN
    ]
    assert seen["devices"][1]["detail"] == "max error nan vs the CPU"


@pytest.mark.parametrize("number,text", [(92400, "9.24.0"), (90100, "9.1.0"), (8700, "8.7.0"), (None, None)])
def test_cudnn_numbers_read_as_versions(number: int | None, text: str | None) -> None:
    from builder.smoke.runtime_probe import cudnn_text

    assert cudnn_text(number) == text
