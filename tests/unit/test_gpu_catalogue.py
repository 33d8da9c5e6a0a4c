"""builder/resolve/gpus.py's catalogue, built from a freshly loaded matrix: each GPU with its architecture, class,
host, driver floors and sources, a product found by its alias; what an unknown name is told, and the notes when
no combination is left. The catalogue is cached per matrix object, so a test that reads the default (cached)
matrix may see a catalogue built before it ran; the catalogue tests load their own. Written for the survivors of
`bench/mutation.py resolve` (docs/mutation.md)."""

from __future__ import annotations

import pytest
from matrix_kit import query, real

from builder.core.errors import UsageError
from builder.core.kinds import GpuClass
from builder.core.resources import default_matrix_path
from builder.core.versions import parse_driver
from builder.matrix.loader import load_matrix
from builder.matrix.model import Host
from builder.resolve.gpus import catalogue, find_gpu
from builder.resolve.resolver import lookup


def test_a_product_brings_its_host_driver_floors_and_sources() -> None:
    found = find_gpu(load_matrix(default_matrix_path()), "NVIDIA L4")
    assert (found.name, found.arch.name, found.kind, found.host) == (
        "NVIDIA L4",
        "sm_89",
        GpuClass.DATACENTER,
        Host.ANY,
    )
    assert found.driver_min == (parse_driver("525.105.17"), parse_driver("530.41.03"))
    assert found.sources[-1] == "nvidia-gpu-tables" and len(found.sources) >= 2  # the arch's, then the product's


def test_a_gpu_without_a_product_keeps_its_architectures_sources() -> None:
    found = find_gpu(load_matrix(default_matrix_path()), "Tesla T4")
    assert (found.name, found.arch.name, found.kind, found.host, found.driver_min) == (
        "NVIDIA T4",
        "sm_75",
        GpuClass.DATACENTER,
        Host.ANY,
        (),
    )
    assert found.sources == ("cuda-gpus-copies", "cmake-cuda-archs", "nvidia-arch-matrix", "cuda-relnotes")


def test_a_product_is_found_by_its_alias() -> None:
    m = load_matrix(default_matrix_path())
    found = find_gpu(m, "DGX Spark")
    assert (found.name, found.arch.name, found.kind, found.host) == (
        "NVIDIA GB10",
        "sm_121",
        GpuClass.EMBEDDED,
        Host.SBSA,
    )
    assert "gpu-hosts" in found.sources
    assert [k.gpu.name for k in catalogue(m) if k.words == ("dgx", "spark")] == ["NVIDIA GB10"]


GIVE_ARCH = (
    "; give its architecture instead (--arch, e.g. sm_86: `nvidia-smi --query-gpu=compute_cap --format=csv` prints it)"
)


def refusal(text: str) -> str:
    with pytest.raises(UsageError) as raised:
        find_gpu(real(), text)
    return str(raised.value)


def test_a_listed_name_plus_words_suggests_each_it_starts_with() -> None:
    assert refusal("GTX 780 Ti Ti") == (
        "--gpu: 'GTX 780 Ti Ti' is not a GPU the matrix knows "
        "(did you mean 'GeForce GTX 780 Ti' (sm_35) or 'GeForce GTX 780' (sm_35)?)"
    )


def test_an_unknown_name_suggests_the_closest_one_or_none() -> None:
    assert refusal(
        "RTX 4909"
    ) == "--gpu: 'RTX 4909' is not a GPU the matrix knows (did you mean 'GeForce RTX 4090'?)" + (GIVE_ARCH)
    assert refusal("Quadro 1234567") == "--gpu: 'Quadro 1234567' is not a GPU the matrix knows" + GIVE_ARCH


def test_the_notes_when_no_combination_is_left() -> None:
    m = real()
    assert lookup(m, query(m, torch="9.9")).notes == (
        f"no torch release in the matrix matches --torch ==9.9.* (newest: {m.torch[-1].version})",
    )
    assert str(m.torch[-1].version) != str(m.torch[-2].version)
    assert lookup(m, query(m, python="3.99")).notes == (
        "no Python matching --python ==3.99.* is offered by a selected torch release or OS",
    )
