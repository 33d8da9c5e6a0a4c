"""builder/resolve/require.py at its edges: the GPU brands a name implies, each line rule_container_start can
say, and every operator of the NVIDIA_REQUIRE_CUDA grammar on both sides of its bound. Written for the
survivors of `bench/mutation.py resolve` (docs/mutation.md)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from matrix_kit import real

from builder.core.kinds import GpuClass
from builder.core.versions import parse_driver
from builder.resolve.facts import Facts
from builder.resolve.gpus import Gpu, catalogue
from builder.resolve.require import SOURCES, brands, rule_container_start
from builder.resolve.rules.check import Missing, Status

M = real()
F = Facts(M)
ANY_GPU = catalogue(M)[0].gpu


def gpu(name: str, kind: GpuClass = GpuClass.CONSUMER) -> Gpu:
    return replace(ANY_GPU, name=name, kind=kind)


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", GpuClass.DATACENTER, {"tesla", "nvidia"}),
        ("GeForce RTX 4090", GpuClass.DATACENTER, {"tesla", "nvidia"}),  # the class decides first
        ("GeForce RTX 4090", GpuClass.CONSUMER, {"geforce", "geforcertx"}),  # the name starts with it
        ("NVIDIA GeForce GTX 1080", GpuClass.CONSUMER, {"geforce", "geforcertx"}),  # a word inside the name
        ("TITAN RTX", GpuClass.CONSUMER, {"titan", "titanrtx"}),
        ("NVIDIA TITAN V", GpuClass.CONSUMER, {"titan", "titanrtx"}),
        ("Quadro RTX 6000", GpuClass.CONSUMER, {"quadro", "quadrortx"}),
        ("NVIDIA Quadro P4000", GpuClass.CONSUMER, {"quadro", "quadrortx"}),
        ("NVIDIA RTX A6000", GpuClass.CONSUMER, {"nvidia", "nvidiartx"}),
        ("NVIDIA GeForceless", GpuClass.CONSUMER, {"nvidia", "nvidiartx"}),  # not the word "geforce"
        ("Jetson Orin", GpuClass.EMBEDDED, {"nvidia", "nvidiartx"}),
    ],
)
def test_brands_a_name_implies(name: str, kind: GpuClass, expected: set[str]) -> None:
    assert brands(gpu(name, kind)) == frozenset(expected)


def test_no_requirement_passes_with_its_reason() -> None:
    found = rule_container_start(F, parse_driver("535"), (), "")
    assert found == replace(found, rule="container-start", ok=True, missing=None, sources=SOURCES)
    assert found.reason == "the image sets no NVIDIA_REQUIRE_CUDA: no start check"


def test_no_driver_is_an_open_input_naming_the_first_alternative() -> None:
    found = rule_container_start(F, None, (), "cuda>=12.4 brand=tesla,driver>=470,driver<471")
    assert (found.rule, found.status, found.missing, found.sources) == (
        "container-start",
        Status.NOT_CHECKED,
        Missing.INPUT,
        SOURCES,
    )
    assert found.reason == "no driver given (the image requires cuda>=12.4 brand=tesla,driver>=470,driver<471)"
    assert found.condition == "a driver that meets NVIDIA_REQUIRE_CUDA cuda>=12.4"


def test_a_branch_the_matrix_does_not_know_fails_with_its_reason() -> None:
    found = rule_container_start(F, parse_driver("600.1"), (), "cuda>=12.0")  # inside the recorded range, not recorded
    assert (found.rule, found.ok, found.sources) == ("container-start", False, SOURCES)
    assert found.reason == "driver branch 600 is not in the matrix"


def test_a_branch_newer_than_every_recorded_one_is_not_checked() -> None:
    found = rule_container_start(F, parse_driver("999.1"), (), "cuda>=12.0")
    assert (found.rule, found.status, found.missing, found.sources) == (
        "container-start", Status.NOT_CHECKED, Missing.FACT, SOURCES,
    )  # fmt: skip
    assert found.reason.startswith("the driver branch 999 is newer than every recorded one (newest: ")


def test_the_alternative_that_holds_is_named() -> None:
    require = "cuda>=12.4 brand=tesla,driver>=470,driver<471"
    found = rule_container_start(F, parse_driver("470.82.01"), (gpu("Tesla T4", GpuClass.DATACENTER),), require)
    assert (found.rule, found.ok, found.missing, found.sources) == ("container-start", True, None, SOURCES)
    assert found.reason == "NVIDIA_REQUIRE_CUDA holds: brand=tesla,driver>=470,driver<471"
    assert rule_container_start(F, parse_driver("550.54.15"), (), require).reason == (
        "NVIDIA_REQUIRE_CUDA holds: cuda>=12.4"
    )


def test_the_failure_names_the_reported_cuda_and_the_first_alternative() -> None:
    one = rule_container_start(F, parse_driver("535.104.05"), (), "cuda>=12.4")
    assert (one.rule, one.ok, one.sources) == ("container-start", False, SOURCES)
    assert one.reason == (
        "the container will not start: driver 535.104.05 reports CUDA 12.2, the image requires cuda>=12.4"
    )
    several = rule_container_start(F, parse_driver("535.104.05"), (), "cuda>=12.4 brand=tesla,driver>=470,driver<471")
    assert several.reason == (
        "the container will not start: driver 535.104.05 reports CUDA 12.2, the image requires cuda>=12.4 "
        "(or a listed driver branch and GPU brand)"
    )


def test_a_brand_is_met_by_any_of_the_gpus() -> None:
    require = "brand=quadro"
    geforce, quadro = gpu("GeForce RTX 3090"), gpu("Quadro RTX 6000")
    assert rule_container_start(F, parse_driver("550.54.15"), (geforce, quadro), require).ok
    assert not rule_container_start(F, parse_driver("550.54.15"), (geforce,), require).ok
    assert not rule_container_start(F, parse_driver("550.54.15"), (), require).ok  # no GPU given: no brand known


def holds(condition: str, driver: str = "550.54.15", gpus: tuple[Gpu, ...] = ()) -> bool:
    return rule_container_start(F, parse_driver(driver), gpus, condition).ok


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        # the 550 branch reports CUDA 12.4
        ("cuda>=12.4", True),
        ("cuda>=12.5", False),
        ("cuda<=12.4", True),
        ("cuda<=12.3", False),
        ("cuda<12.5", True),
        ("cuda<12.4", False),
        ("cuda>12.3", True),
        ("cuda>12.4", False),
        ("cuda=12.4", True),
        ("cuda=12.3", False),
        ("cuda>=12", True),  # no minor: 12.0
        ("cuda<=12", False),
        ("cuda=12", False),
        # driver 550.54.15, compared part by part, the shorter padded with zeros
        ("driver>=550.54.15", True),
        ("driver>=550.54.16", False),
        ("driver<=550.54.15", True),
        ("driver<=550.54.14", False),
        ("driver<550.54.16", True),
        ("driver<550.54.15", False),
        ("driver>550.54.14", True),
        ("driver>550.54.15", False),
        ("driver=550.54.15", True),
        ("driver=550.54", False),
        ("driver>=550", True),
        ("driver<551", True),
        ("driver<550", False),
        ("driver>=550.0", True),  # the condition padded: 550.0.0
        ("driver<550.0", False),
        # what the grammar does not know fails, as in the toolkit
        ("cuda~=12.4", False),
        ("cuda>=12.4x!", False),
        ("gpu>=1", False),
        (" cuda>=12.4", True),  # split on spaces: an empty alternative never comes
        ("cuda>=13.0,driver>=550", False),  # every condition of an alternative must hold
        ("cuda>=12.0,driver>=550", True),
    ],
)
def test_each_operator_on_both_sides_of_its_bound(condition: str, expected: bool) -> None:
    assert holds(condition) is expected


@pytest.mark.parametrize("condition", ["driver>=abc", "driver>=550.54.15.1", "driver<5500"])
def test_a_driver_value_that_is_no_version_fails_and_raises_nothing(condition: str) -> None:
    # it matched the grammar's characters, then driver_version raised ValueError: inspect said "internal error"
    found = rule_container_start(F, parse_driver("550.54.15"), (), f"{condition} cuda>=13.0")
    assert not found.ok
    assert rule_container_start(F, parse_driver("550.54.15"), (), f"{condition} cuda>=12.0").ok


def test_a_missing_minor_or_part_is_zero() -> None:
    assert holds("cuda>=12", driver="525.60.13")  # the 525 branch reports CUDA 12.0: 12 is 12.0
    assert not holds("cuda>12", driver="525.60.13")
    assert holds("driver>=550", driver="550.0.0")  # 550 is 550.0.0
    assert holds("driver=550", driver="550.0.0")


def test_a_bare_branch_driver_is_padded_too() -> None:
    assert holds("driver>=550.0.0", driver="550")
    assert not holds("driver>550.0.0", driver="550")
    assert holds("driver=550.0", driver="550")


def test_brand_conditions_take_only_equals_and_any_case() -> None:
    tesla = (gpu("Tesla T4", GpuClass.DATACENTER),)
    assert holds("brand=tesla", gpus=tesla)
    assert holds("brand=Tesla", gpus=tesla)
    assert holds("brand=TESLA", gpus=tesla)
    assert not holds("brand=geforce", gpus=tesla)
    assert not holds("brand>=tesla", gpus=tesla)
    assert not holds("brand<tesla", gpus=tesla)
    assert not holds("brand>tesla", gpus=tesla)
