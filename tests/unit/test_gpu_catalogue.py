"""builder/resolve/gpus.py's catalogue, built from a freshly loaded matrix: each GPU with its architecture, class,
host, driver floors and sources, a product found by its alias. The catalogue is cached per matrix object, so a
test that reads the default (cached) matrix may see a catalogue built before it ran; these load their own.
Written for the survivors of `bench/mutation.py resolve` (docs/mutation.md)."""

from __future__ import annotations

from builder.core.kinds import GpuClass
from builder.core.resources import default_matrix_path
from builder.core.versions import parse_driver
from builder.matrix.loader import load_matrix
from builder.matrix.model import Host
from builder.resolve.gpus import catalogue, find_gpu


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
    assert found.sources == ("cuda-gpus-copies", "cmake-cuda-archs")


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
