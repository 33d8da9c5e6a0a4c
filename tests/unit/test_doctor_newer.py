"""`torchyard doctor` on the builds a driver keeps out of reach, word for word: a newer build that cannot be
checked is named with what the matrix lacks, a choice that cannot be fully checked says it may run and why, a
build the driver runs is never called out of reach, and a question nothing meets names the failures of the
question asked (after a CPU fallback: both). Written for the survivors of `bench/mutation.py host` in
diagnose and _newer_out_of_reach, and for _unchecked_newer, which no test reached."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from host_kit import H100X2_580, NO_DEVICES, RTX4090_520, RTX4090_535, V100_PCI, machine
from matrix_kit import query
from test_doctor_fixes import DRIVER_CUDA_FIX, DRIVER_GPU_FIX
from test_doctor_mutants import NO_DRIVER, NOT_ASKED, NOT_NAMED, TO_R580, UPDATE_DRIVER, M, bare, problems

from builder.host.doctor import _newer_out_of_reach, diagnose
from builder.host.probe import probe
from builder.resolve.query import Query, RawQuery
from builder.resolve.resolver import Result, first_valid

PINNED = {"python": "3.11", "os": "debian12"}  # one build per release and variant: the ranking shows releases
UNRECORDED_271 = (
    "the compiled architectures of torch 2.7.1+cu118 are not recorded (no source); "
    "the compiled architectures of torch 2.7.1+cu118 are not recorded"
)
TROUBLESHOOTING = "see docs/troubleshooting.md"
R520_ENDED = ("driver-lifecycle", f"driver branch R520 {NOT_NAMED}", TO_R580)
DEBIAN12_PAST = (
    "os-lifecycle",
    "debian12 is past its regular security support (ended June 2026): long-term support only, until June 2028",
    "an image on an OS inside its regular support: the chooser prefers one unless --os asks (torchyard lookup "
    "--here lists them)",
)


@pytest.mark.parametrize(
    ("wish", "chosen", "os_past"),
    [
        # torchvision 0.20.1 takes no Python 3.13: the OS inside its regular support with its own Python
        ({}, "torch2.5.1-cu118-py3.10-ubuntu22.04", []),
        (PINNED, "torch2.5.1-cu118-py3.11-debian12", [DEBIAN12_PAST]),
    ],
)
def test_a_newer_build_that_cannot_be_checked_is_named_and_the_choice_is_the_newest_checked(
    wish: dict[str, Any], chosen: str, os_past: list[tuple[str, str, str]]
) -> None:
    # 520 runs no CUDA 12 build; the cu118 wheels of torch 2.6 and 2.7 may run, but their architectures are not
    # recorded: the newest of them (2.7.1, not 2.7.0) is named, and 2.5.1 is the newest every check passed for.
    d = bare(machine(RTX4090_520, driver="520.61.05"), **wish)
    assert problems(d) == [
        ("driver-cuda", "driver 520.61.05 cannot run torch 2.15.0+cu132 (CUDA 13.2): driver 520.61.05: every CUDA 13 "
         "build needs >= 580.65.06; chose torch 2.5.1+cu118, the newest every check passed for", UPDATE_DRIVER),
        ("not-recorded", f"torch 2.7.1+cu118 is newer and may run here, but it cannot be checked: {UNRECORDED_271}",
         "record the missing facts in matrix.toml (with their sources), or try it: torchyard inspect IMAGE --here"),
        R520_ENDED,
        *os_past,
    ]  # fmt: skip
    assert d.unchecked == [NOT_ASKED]
    assert d.recommended is not None and d.recommended.result.combo.id == chosen


@pytest.mark.parametrize(
    ("wish", "chosen", "os_past"),
    [
        ({"torch": "2.7"}, "torch2.7.1-cu118-py3.13-debian13", []),
        ({"torch": "2.7", **PINNED}, "torch2.7.1-cu118-py3.11-debian12", [DEBIAN12_PAST]),
    ],
)
def test_a_choice_that_cannot_be_fully_checked_says_it_may_run_and_what_is_missing(
    wish: dict[str, Any], chosen: str, os_past: list[tuple[str, str, str]]
) -> None:
    # The same release with an older CUDA: the driver still keeps torch 2.7's PyPI default (cu126) out of reach.
    d = bare(machine(RTX4090_520, driver="520.61.05"), **wish)
    assert problems(d) == [
        ("driver-cuda", "driver 520.61.05 cannot run torch 2.7.1+cu126 (CUDA 12.6): driver 520.61.05: every CUDA 12 "
         f"build needs >= 525.60.13; chose torch 2.7.1+cu118, the newest that may run (CANNOT TELL: {UNRECORDED_271})",
         "update the driver (to >= 525.60.13) for the newest builds, or keep the choice above"),
        R520_ENDED,
        *os_past,
    ]  # fmt: skip
    assert d.recommended is not None and d.recommended.result.combo.id == chosen


def test_a_build_the_driver_runs_is_not_out_of_reach_when_only_the_ranking_differs() -> None:
    # Without a driver PyPI's default for torch 2.6 (cu124) ranks first, with 580 the newest CUDA at full level
    # (cu126): 580 runs both, so nothing is out of reach and there is no driver to update.
    d = bare(machine(H100X2_580, driver="580.65.06"), torch="2.6")
    assert problems(d) == []
    assert d.recommended is not None and d.recommended.result.combo.id == "torch2.6.0-cu126-py3.13-debian13"


def test_newer_builds_are_told_for_the_gpus_named_and_only_then() -> None:
    without_gpu = query(M, driver="535.104.05")
    assert _newer_out_of_reach(M, without_gpu, _first(without_gpu)) == []
    with_gpu = query(M, driver="535.104.05", gpu="RTX 4090")
    assert [p.check for p in _newer_out_of_reach(M, with_gpu, _first(with_gpu))] == ["driver-cuda"]


def test_after_a_fallback_the_cpu_question_s_failures_follow_the_gpu_question_s() -> None:
    # The GPU question's nearest build is torch 2.14.1 (2.15's CUDA 13 builds have no sm_70), the CPU
    # question's is 2.15.0: each fails on Python 3.8 in its own words.
    d = bare(machine(NO_DEVICES, smi_code=6, driver="590.48.01", lspci=V100_PCI), torch=">=2.14", python="3.8")
    assert d.recommended is None
    assert problems(d) == [
        ("driver", "nvidia-smi found no GPUs (No devices were found)",
         "check that the NVIDIA kernel module is loaded: nvidia-smi must list the GPUs (reboot after a driver update)"),
        ("driver-gpu", "NVIDIA V100 (Volta) is supported up to the 580 driver branch (legacy); driver 590.48.01 no "
         "longer supports it: use a 580.x driver", DRIVER_GPU_FIX),
        ("python-torch", "torch 2.14.1 has no wheels for Python 3.8 (wheels: 3.10-3.14)", TROUBLESHOOTING),
        ("companions", "torchvision 0.29.1 requires Python!=3.14.1,>=3.10", TROUBLESHOOTING),
        ("python-torch", "torch 2.15.0 has no wheels for Python 3.8 (wheels: 3.11-3.15)", TROUBLESHOOTING),
        ("companions", "torchvision 0.29.2 requires Python!=3.14.1,>=3.10", TROUBLESHOOTING),
        ("driver-lifecycle", f"driver branch R590 (feature branch) {NOT_NAMED}", TO_R580),
    ]  # fmt: skip


def test_a_variant_the_driver_cannot_run_is_told_its_own_rule_not_the_cpu_question_s() -> None:
    d = bare(machine(RTX4090_535, driver="535.104.05"), variant="cu130")
    assert d.recommended is None
    cuda_13 = ("driver-cuda", "driver 535.104.05: every CUDA 13 build needs >= 580.65.06", DRIVER_CUDA_FIX)
    r535 = ("driver-lifecycle", "driver branch R535 (long-term branch) reached its end of life in June 2026", TO_R580)
    assert problems(d) == [cuda_13, r535]  # the question asked, not the CPU one (which a CPU image meets)


def test_without_a_gpu_every_reading_problem_is_said_in_one_unchecked_line() -> None:
    host = probe(M, machine(None, toolkit=False))
    reading = dataclasses.replace(host.reading, problems=[NO_DRIVER, "no NVIDIA driver: NVML is not installed"])
    d = diagnose(M, dataclasses.replace(host, reading=reading), None, RawQuery(), "t")
    assert d.unchecked == [f"GPU checks: {NO_DRIVER}; no NVIDIA driver: NVML is not installed", NOT_ASKED]


def _first(q: Query) -> Result:
    found = first_valid(M, q)
    assert found is not None
    return found
