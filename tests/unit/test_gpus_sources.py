"""The GPU reading's other sources and edges: NVML (nvidia-ml-py) when nvidia-smi is missing, lspci's lines, what a
failing nvidia-smi's message becomes; and the CPU question doctor falls back to. Written for the survivors of
`bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from host_kit import LSPCI, SMI, FakeSystem, machine
from matrix_kit import query, real

from builder.host.choose import cpu_query
from builder.host.gpus import SeenGpu, read_gpus
from builder.host.system import Ran


class Nvml(types.ModuleType):
    """pynvml as nvidia-ml-py has it (NVML's camel-case names): bytes from older bindings, no MIG on GPU 1."""

    def __init__(self, fail: Exception | None = None) -> None:
        super().__init__("pynvml")
        self.fail, self.shut = fail, False

    def nvmlInit(self) -> None:
        if self.fail is not None:
            raise self.fail

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.65.06"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return (9, 0) if handle == 0 else (8, 9)

    def nvmlDeviceGetMigMode(self, handle: int) -> tuple[int, int]:
        if handle == 1:
            raise RuntimeError("NVMLError_NotSupported")
        return (1, 0)  # (current, pending): MIG on now, off after the next reset

    def nvmlDeviceGetName(self, handle: int) -> Any:
        return b"NVIDIA H100 80GB HBM3" if handle == 0 else "NVIDIA L4"

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return types.SimpleNamespace(total=((81559 if handle == 0 else 23034) << 20) + 4096)  # not whole MiB


def test_without_nvidia_smi_nvml_lists_the_driver_and_every_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = Nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    reading = read_gpus(machine(None))
    assert (reading.driver, reading.source, reading.problems) == ("580.65.06", "nvml", [])
    assert reading.gpus == [
        SeenGpu(0, "NVIDIA H100 80GB HBM3", "9.0", 81559, mig=True),
        SeenGpu(1, "NVIDIA L4", "8.9", 23034, mig=False),
    ]
    assert nvml.shut


def test_nvml_that_cannot_start_is_a_problem_and_the_kernel_module_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", Nvml(fail=RuntimeError("Driver Not Loaded")))
    reading = read_gpus(machine(None, driver="580.65.06"))
    assert reading.problems[0] == "NVML could not start: Driver Not Loaded"
    assert (reading.driver, reading.source, reading.gpus) == ("580.65.06", "/proc/driver/nvidia/version", [])


def test_a_failing_nvidia_smi_without_output_says_no_output_and_a_long_line_is_cut() -> None:
    silent = read_gpus(FakeSystem(commands={SMI: Ran(9, "", "")}))
    assert silent.problems[0] == "nvidia-smi failed (exit 9): no output"
    loud = read_gpus(FakeSystem(commands={SMI: Ran(9, "", "\n  " + "x" * 300 + "\nsecond\n")}))
    assert loud.problems[0] == "nvidia-smi failed (exit 9): " + "x" * 200


def test_lspci_names_a_gpu_without_a_bracketed_marketing_name_by_its_device_name() -> None:
    line = "01:00.0 3D controller [0302]: NVIDIA Corporation Device 2330 [10de:2330] (rev a1)\n"
    reading = read_gpus(FakeSystem(commands={LSPCI: Ran(0, line)}))
    assert reading.undriven == ["Device 2330"]


def test_a_failing_lspci_names_no_gpu_whatever_it_printed() -> None:
    line = "01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)\n"
    assert read_gpus(FakeSystem(commands={LSPCI: Ran(0, line)})).undriven == ["H100 SXM5 80GB"]
    assert read_gpus(FakeSystem(commands={LSPCI: Ran(1, line)})).undriven == []


def test_the_cpu_question_drops_every_gpu_fact_of_the_gpu_question() -> None:
    m = real()
    q = query(m, driver="535.104.05", gpu="RTX 4090", forward_compat=True)
    assert (q.archs != (), q.gpus != (), q.driver is not None, q.forward_compat) == (True, True, True, True)
    cpu = cpu_query(q)
    assert (cpu.variant, cpu.archs, cpu.gpus, cpu.driver, cpu.forward_compat) == ("cpu", (), (), None, False)
    assert (cpu.torch, cpu.python, cpu.platform) == (q.torch, q.python, q.platform)
