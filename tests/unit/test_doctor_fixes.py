"""`torchyard doctor`'s fixes, exactly: the driver problem's fix for each way a driver fails, and the fix of each
rule that leaves no GPU image for the machine (also for GPUs known only by their architecture). Written for the
survivors of `bench/mutation.py host` (docs/mutation.md)."""

from __future__ import annotations

from typing import Any

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, NO_DEVICES, RTX3090_PCI, SMI_BROKEN, V100_PCI, FakeSystem, machine
from matrix_kit import real

from builder.host.doctor import Diagnosis, diagnose
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
DRIVER_GPU_FIX = "install a driver branch that supports this GPU (the message names the range)"
DRIVER_CUDA_FIX = "update the NVIDIA driver, or pick an older CUDA variant (torchyard lookup --driver ... lists them)"


def doctor(system: FakeSystem, docker: dict[str, Any] = DOCKER_WITH_TOOLKIT) -> Diagnosis:
    return diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard")


def fixes(d: Diagnosis, check: str) -> list[str]:
    return [p.fix for p in d.problems if p.check == check]


@pytest.mark.parametrize(
    ("system", "fix"),
    [
        (machine(SMI_BROKEN, smi_code=9, lspci=RTX3090_PCI),
         "the NVIDIA kernel module is not running: reboot after installing or updating the driver (see dmesg)"),
        (machine(None, lspci=RTX3090_PCI),  # a GPU on the PCI bus, no driver at all
         "install the NVIDIA driver (https://www.nvidia.com/en-us/drivers/) and reboot"),
        (machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI),  # nvidia-smi runs, lists nothing
         "check that the NVIDIA kernel module is loaded: nvidia-smi must list the GPUs (reboot after a driver update)"),
    ],
)  # fmt: skip
def test_each_way_a_driver_fails_gets_its_own_fix(system: FakeSystem, fix: str) -> None:
    assert fixes(doctor(system), "driver") == [fix]


def test_a_gpu_the_driver_dropped_gets_the_driver_gpu_rule_s_fix() -> None:
    d = doctor(machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI))
    assert fixes(d, "driver-gpu") == [DRIVER_GPU_FIX]


def test_a_gpu_known_only_by_its_architecture_on_a_too_old_driver_is_told_every_rule_it_fails() -> None:
    d = doctor(machine("0, NVIDIA Made Up, 8.9, 24564, 418.40.04, [N/A]\n", driver="418.40.04"))
    assert (d.query.archs != (), d.query.gpus) == (True, ())  # the query names an architecture, no GPU
    assert [(p.check, p.message, p.fix) for p in d.problems[:2]] == [
        ("driver-gpu", "sm_89 (Ada Lovelace) needs driver >= 520.56.06; driver 418.40.04 lacks it", DRIVER_GPU_FIX),
        ("driver-cuda", "driver 418.40.04: every CUDA 13 build needs >= 580.65.06", DRIVER_CUDA_FIX),
    ]


def test_a_known_gpu_on_a_too_old_driver_is_told_every_rule_it_fails() -> None:
    d = doctor(machine("0, NVIDIA GeForce RTX 4090, 8.9, 24564, 418.40.04, [N/A]\n", driver="418.40.04"))
    assert [(p.check, p.fix) for p in d.problems[:3]] == [
        ("driver-gpu", DRIVER_GPU_FIX), ("driver-cuda", DRIVER_CUDA_FIX), ("gpu-image", "fix the problems above")
    ]  # fmt: skip


PYTHON_37 = ("python-os", "debian13 offers Python 3.13, 3.10, 3.11, 3.12, 3.14, not 3.7", "see docs/troubleshooting.md")
R535_ENDED = ("driver-lifecycle", "driver branch R535 (long-term branch) reached its end of life in June 2026",
              "install a driver of branch R580 (long-term support, until June 2028)")  # fmt: skip


@pytest.mark.parametrize(
    ("system", "lifecycle"),
    [
        (machine(None), []),
        (machine("0, NVIDIA GeForce RTX 4090, 8.9, 24564, 535.104.05, [N/A]\n", driver="535"), [R535_ENDED]),
    ],
)
def test_a_wish_no_image_meets_is_said_once_with_or_without_a_gpu(
    system: FakeSystem, lifecycle: list[tuple[str, str, str]]
) -> None:
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: DOCKER_WITH_TOOLKIT), RawQuery(python="3.7"), "t")
    assert d.recommended is None
    assert [(p.check, p.message, p.fix) for p in d.problems if p.check not in ("shm", "gpu-image")] == [
        PYTHON_37,
        *lifecycle,
    ]
