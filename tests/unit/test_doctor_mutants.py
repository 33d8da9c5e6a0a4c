"""`torchyard doctor`'s answer, exactly: every problem, every unchecked line and the recommended image's run,
build and pip lines for recorded machines, and the run line's GPU flags from the runtime. Written for the
survivors of `bench/mutation.py host` in diagnose, _recommend, build_command and _newer_out_of_reach."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from host_kit import (
    FUTURE,
    H100X2_570,
    NO_DEVICES,
    RTX3090_PCI,
    RTX4090_535,
    RTX5090_575,
    SMI_BROKEN,
    V100_PCI,
    FakeSystem,
    RunEngine,
    holding,
    machine,
)
from matrix_kit import real

from builder.host.doctor import Diagnosis, build_command, diagnose
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
RUN = 'docker run --rm -it {flags}--ipc=host -v "$PWD":/workspace -w /workspace torchyard:{tag} python'
CPU_BUILD = "torchyard build --torch 2.15.0 --variant cpu --python 3.13 --os debian13 --platform linux/amd64 --repo t"
CPU_PIP = (
    "pip install torch==2.15.0 torchvision==0.29.2 torchaudio==2.11.1 --index-url https://download.pytorch.org/whl/cpu"
)
NOT_ASKED = "the container runtime (not asked)"
NO_DRIVER = "no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded"
SMI_FAILED = (
    "nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
NO_GPU_IMAGE = ("gpu-image", "no GPU image runs on this machine: recommending the CPU image", "fix the problems above")
UPDATE_DRIVER = "update the driver (to >= 580.65.06) for the newest builds, or keep the choice above"
TO_R580 = "install a driver of branch R580 (long-term support, until June 2028)"
NOT_NAMED = (
    "is no longer supported by NVIDIA: its list of supported data center branches of September 2026 does not name it"
)


def bare(system: FakeSystem, **wish: Any) -> Diagnosis:
    """Doctor without the runtime asked: no runtime problems, only the ones diagnose finds itself."""
    return diagnose(M, probe(M, system), None, RawQuery(**wish), "t")


def problems(d: Diagnosis) -> list[tuple[str, str, str]]:
    return [(p.check, p.message, p.fix) for p in d.problems]


def lines(d: Diagnosis) -> tuple[str, str, tuple[str, ...], str | None, str, str]:
    """What doctor recommends; the run line is None here (no engine asked, and `t` names no registry)."""
    assert d.recommended is not None
    r = d.recommended
    return (r.result.combo.id, r.image, r.gpu_flags, d.run, r.build, r.pip)


def cpu_lines() -> tuple[str, str, tuple[str, ...], str | None, str, str]:
    return ("torch2.15.0-cpu-py3.13-debian13", "t:2.15.0-cpu-py3.13-debian13-runtime", (), None, CPU_BUILD,
            CPU_PIP)  # fmt: skip


def test_a_gpu_newer_than_the_matrix_names_the_gpu_with_the_update_fix_and_falls_back() -> None:
    d = bare(machine(FUTURE, driver="620.10.01"))
    assert problems(d) == [
        ("gpu", "NVIDIA Future GPU is sm_130, newer than every architecture torchyard knows: no image can be vouched "
         "for", "update torchyard (pip install -U torchyard), whose matrix may know it"),
        NO_GPU_IMAGE,
    ]  # fmt: skip
    assert d.unchecked == [NOT_ASKED]
    assert lines(d) == cpu_lines()


def test_a_failing_driver_is_one_driver_problem_and_one_unchecked_line() -> None:
    d = bare(machine(SMI_BROKEN, smi_code=9, lspci=RTX3090_PCI))
    fix = "the NVIDIA kernel module is not running: reboot after installing or updating the driver (see dmesg)"
    assert problems(d) == [("driver", SMI_FAILED, fix)]
    assert d.unchecked == [f"GPU checks: the driver is installed but fails ({SMI_FAILED})", NOT_ASKED]
    assert lines(d) == cpu_lines()


def test_no_gpu_at_all_is_unchecked_not_a_problem() -> None:
    d = bare(machine(None, toolkit=False))
    assert problems(d) == []
    assert d.unchecked == [f"GPU checks: {NO_DRIVER}", NOT_ASKED]
    assert lines(d) == cpu_lines()


def test_no_gpu_and_no_reading_problem_says_no_nvidia_gpu_found() -> None:
    host = probe(M, machine(None, toolkit=False))
    host = dataclasses.replace(host, reading=dataclasses.replace(host.reading, problems=[]))
    d = diagnose(M, host, None, RawQuery(), "t")
    assert d.unchecked == ["GPU checks: no NVIDIA GPU found", NOT_ASKED]


def test_a_gpu_without_a_driver_is_a_driver_problem_and_still_gets_the_gpu_image() -> None:
    d = bare(machine(None, lspci=RTX3090_PCI))
    assert problems(d) == [
        ("driver", NO_DRIVER, "install the NVIDIA driver (https://www.nvidia.com/en-us/drivers/) and reboot")
    ]
    assert d.unchecked == [NOT_ASKED]
    assert lines(d) == (
        "torch2.15.0-cu132-py3.13-debian13",
        "t:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime",
        ("--gpus", "all"),
        None,
        "torchyard build --torch 2.15.0 --variant cu132 --python 3.13 --os debian13 --platform linux/amd64 --repo t",
        "pip install torch==2.15.0 torchvision==0.29.2 torchaudio==2.11.1",
    )


def test_a_dropped_gpu_lists_the_driver_the_window_and_the_cpu_fallback_in_order() -> None:
    d = bare(machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI))
    assert problems(d) == [
        ("driver", "nvidia-smi found no GPUs (No devices were found)",
         "check that the NVIDIA kernel module is loaded: nvidia-smi must list the GPUs (reboot after a driver update)"),
        ("driver-gpu", "NVIDIA V100 (Volta) is supported up to the 580 driver branch (legacy); driver 590.48.01 no "
         "longer supports it: use a 580.x driver",
         "install a driver branch that supports this GPU (the message names the range)"),
        NO_GPU_IMAGE,
        ("driver-lifecycle", f"driver branch R590 (feature branch) {NOT_NAMED}", TO_R580),
    ]  # fmt: skip
    assert d.unchecked == [NOT_ASKED]
    assert lines(d) == cpu_lines()


@pytest.mark.parametrize(
    ("system", "driver", "chose", "tag", "pip", "ended"),
    [
        (machine(RTX4090_535, driver="535.104.05"), "535.104.05", "2.14.1+cu126",
         "2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime",
         "pip install torch==2.14.1 torchvision==0.29.1 torchaudio==2.11.1 "
         "--index-url https://download.pytorch.org/whl/cu126",
         "driver branch R535 (long-term branch) reached its end of life in June 2026"),
        (machine(H100X2_570, driver="570.124.06"), "570.124.06", "2.14.1+cu126",
         "2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime",
         "pip install torch==2.14.1 torchvision==0.29.1 torchaudio==2.11.1 "
         "--index-url https://download.pytorch.org/whl/cu126",
         f"driver branch R570 (production branch) {NOT_NAMED}"),
        (machine(RTX5090_575, driver="575.57.08"), "575.57.08", "2.11.0+cu128",
         "2.11.0-cuda12.8-cudnn9-py3.13-debian13-runtime",
         "pip install torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0 "
         "--index-url https://download.pytorch.org/whl/cu128",
         f"driver branch R575 {NOT_NAMED}"),
    ],
)  # fmt: skip
def test_an_older_driver_is_told_the_newest_build_it_cannot_run_exactly(
    system: FakeSystem, driver: str, chose: str, tag: str, pip: str, ended: str
) -> None:
    d = bare(system)
    message = (
        f"driver {driver} cannot run torch 2.15.0+cu132 (CUDA 13.2): driver {driver}: every CUDA 13 build needs "
        f">= 580.65.06; chose torch {chose}, the newest it runs"
    )
    assert problems(d) == [("driver-cuda", message, UPDATE_DRIVER), ("driver-lifecycle", ended, TO_R580)]
    assert d.unchecked == [NOT_ASKED]
    torch, _, variant = chose.partition("+")
    assert lines(d) == (
        f"torch{torch}-{variant}-py3.13-debian13",
        f"t:{tag}",
        ("--gpus", "all"),
        None,
        f"torchyard build --torch {torch} --variant {variant} --python 3.13 --os debian13 --platform linux/amd64 "
        "--repo t",
        pip,
    )


def test_the_run_line_takes_the_runtime_s_gpu_flags() -> None:
    system = machine(
        RTX4090_535,
        driver="535.104.05",
        toolkit=False,
        files={
            "/etc/cdi/nvidia.yaml": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n",
            "/etc/docker/daemon.json": '{"default-shm-size": "2g"}',
        },
    )
    info = {"ServerVersion": "28.3.0", "Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}
    here = "t:2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
    engine = RunEngine(images={here: holding(here, "torch2.14.1-cu126-py3.13-debian13")})
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: info), RawQuery(), "t", engine)
    assert d.recommended is not None
    flags, tag = "--device nvidia.com/gpu=all ", "2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
    assert d.run == RUN.format(flags=flags, tag=tag).replace("torchyard:", "t:")


def test_a_wish_no_cpu_image_meets_after_a_fallback_names_the_cpu_question_s_failures() -> None:
    d = bare(machine(FUTURE, driver="620.10.01"), python="3.7")
    assert d.recommended is None
    assert [p.check for p in d.problems] == ["gpu", "python-os"]


def test_the_build_line_quotes_every_part() -> None:
    d = bare(machine(None, toolkit=False))
    assert d.recommended is not None
    c = d.recommended.result.combo
    assert build_command(c, "my repo/x") == (
        "torchyard build --torch 2.15.0 --variant cpu --python 3.13 --os debian13 --platform linux/amd64 "
        "--repo 'my repo/x'"
    )
