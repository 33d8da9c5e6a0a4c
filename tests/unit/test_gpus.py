"""GPU names as people and nvidia-smi write them: the right architecture, or the candidates, never a wrong one."""

from __future__ import annotations

import pytest
from matrix_kit import real

from builder.core.errors import UsageError
from builder.core.kinds import GpuClass
from builder.matrix.model import Host
from builder.resolve.gpus import find_gpu, tokens

M = real()


@pytest.mark.parametrize(
    ("typed", "name", "arch"),
    [
        ("4090", "GeForce RTX 4090", "sm_89"),
        ("rtx4090", "GeForce RTX 4090", "sm_89"),
        ("RTX 4090", "GeForce RTX 4090", "sm_89"),
        ("RTX 4090 Laptop", "GeForce RTX 4090", "sm_89"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "GeForce RTX 4090", "sm_89"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "sm_89"),
        ("H100 SXM", "NVIDIA H100", "sm_90"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100", "sm_90"),
        ("NVIDIA H100 PCIe", "NVIDIA H100", "sm_90"),
        ("A100-80GB", "NVIDIA A100", "sm_80"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100", "sm_80"),
        ("Tesla V100-SXM2-16GB", "NVIDIA V100", "sm_70"),
        ("Tesla T4", "NVIDIA T4", "sm_75"),
        ("T4", "NVIDIA T4", "sm_75"),
        ("T400", "NVIDIA T400", "sm_75"),
        ("A10", "NVIDIA A10", "sm_86"),
        ("L40", "NVIDIA L40", "sm_89"),
        ("L40S", "NVIDIA L40S", "sm_89"),
        ("GB200", "NVIDIA GB200", "sm_100"),
        ("NVIDIA GH200 480GB", "NVIDIA GH200", "sm_90"),
        ("DGX Spark", "NVIDIA GB10", "sm_121"),
        ("NVIDIA GB10", "NVIDIA GB10", "sm_121"),
        ("NVIDIA RTX 6000 Ada Generation", "NVIDIA RTX 6000 Ada", "sm_89"),
        ("Quadro RTX 4000", "Quadro RTX 4000", "sm_75"),
        ("RTX 4000 Ada", "NVIDIA RTX 4000 Ada", "sm_89"),
        ("3090", "GeForce RTX 3090", "sm_86"),
        ("Jetson Orin", "Jetson AGX Orin", "sm_87"),
        ("RTX PRO 6000", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "sm_120"),
        # nvidia-smi's names of cloud GPUs (and torch.cuda.get_device_name()'s, the same string)
        ("A10G", "NVIDIA A10G", "sm_86"),
        ("NVIDIA A10G", "NVIDIA A10G", "sm_86"),
        ("NVIDIA B300 SXM6 AC", "NVIDIA B300", "sm_103"),
        ("Tesla V100-PCIE-32GB", "NVIDIA V100", "sm_70"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100", "sm_80"),
        ("NVIDIA H100 NVL", "NVIDIA H100", "sm_90"),
        ("NVIDIA H200 NVL", "NVIDIA H200", "sm_90"),
        ("GB200 NVL72", "NVIDIA GB200", "sm_100"),
        ("Tesla P100-PCIE-16GB", "Tesla P100", "sm_60"),
        ("NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA RTX 4000 SFF Ada", "sm_89"),
        ("NVIDIA RTX 2000 Ada Generation", "NVIDIA RTX 2000 Ada", "sm_89"),
        ("NVIDIA GeForce GTX 1080 Ti", "GeForce GTX 1080 Ti", "sm_61"),
        ("NVIDIA GeForce RTX 2080 Ti", "GeForce RTX 2080 Ti", "sm_75"),
    ],
)
def test_names_resolve_to_their_architecture(typed: str, name: str, arch: str) -> None:
    gpu = find_gpu(M, typed)
    assert (gpu.name, gpu.arch.name) == (name, arch)


@pytest.mark.parametrize(
    ("typed", "listed"),
    [
        ("RTX 4000", ["NVIDIA RTX 4000 Ada (sm_89)", "Quadro RTX 4000 (sm_75)"]),
        ("Titan", ["NVIDIA TITAN RTX (sm_75)", "NVIDIA TITAN V (sm_70)"]),
    ],
)
def test_names_of_several_architectures_list_the_candidates(typed: str, listed: list[str]) -> None:
    with pytest.raises(UsageError, match="fits GPUs of different architectures") as caught:
        find_gpu(M, typed)
    for candidate in listed:
        assert candidate in str(caught.value)


@pytest.mark.parametrize("typed", ["A10X", "RTX 9999", "Radeon", "nvidia", "PCIe", "NVIDIA SXM6 AC"])
def test_unknown_names_are_refused_not_guessed(typed: str) -> None:
    with pytest.raises(UsageError, match="--gpu: "):
        find_gpu(M, typed)


def test_hosts_and_product_floors_come_with_the_gpu() -> None:
    assert find_gpu(M, "GH200").host is Host.SBSA
    assert find_gpu(M, "Jetson Orin Nano").host is Host.TEGRA
    assert find_gpu(M, "RTX 4090").host is Host.ANY
    assert [str(d) for d in find_gpu(M, "RTX 4060").driver_min] == ["525.147.05", "535.86.05"]


def test_noise_words_and_memory_sizes_are_dropped() -> None:
    assert tokens("NVIDIA A100-SXM4-80GB") == ("a100",)
    assert tokens("NVIDIA GeForce RTX 4090 Laptop GPU") == ("rtx", "4090")


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("NVIDIA B300 SXM6 AC", ("b300",)),  # what follows the form factor goes with it
        ("Tesla V100-SXM2-16GB", ("v100",)),
        ("H100 SXM", ("h100",)),
        ("GB200 NVL72", ("gb200",)),
        ("NVIDIA H100 PCIe", ("h100",)),
        ("PCIe A100 80GB", ("a100",)),  # a form factor before the name ends nothing
        ("NVIDIA RTX 4000 SFF Ada Generation", ("rtx", "4000", "sff", "ada")),  # SFF is a product of its own
    ],
)
def test_a_form_factor_ends_the_name(typed: str, words: tuple[str, ...]) -> None:
    assert tokens(typed) == words


def test_the_a10g_is_a_data_center_gpu_of_its_own_with_its_sources() -> None:
    a10g, a10 = find_gpu(M, "NVIDIA A10G"), find_gpu(M, "NVIDIA A10")
    assert (a10g.name, a10.name) == ("NVIDIA A10G", "NVIDIA A10")  # A10 is not read as the A10G, nor back
    assert a10g.kind is GpuClass.DATACENTER
    assert {"aws-g5", "a10g-sm86"} <= set(a10g.sources) and "aws-g5" not in a10.sources


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [("RTX 4090 Ti", "'GeForce RTX 4090' (sm_89)"), ("H100 Super", "'NVIDIA H100' (sm_90)")],
)
def test_a_product_that_does_not_exist_is_refused_with_a_suggestion(typed: str, suggested: str) -> None:
    with pytest.raises(UsageError) as caught:
        find_gpu(M, typed)
    assert str(caught.value) == f"--gpu: {typed!r} is not a GPU the matrix knows (did you mean {suggested}?)"


@pytest.mark.parametrize(
    ("typed", "arch"),
    [
        ("Jetson AGX Orin Developer Kit", "sm_87"),
        ("NVIDIA Jetson AGX Thor Developer Kit", "sm_110"),
        ("Jetson Thor", "sm_110"),
        ("Quadro RTX 6000", "sm_75"),
        ("NVIDIA RTX A6000", "sm_86"),
    ],
)
def test_names_people_type_resolve_to_the_same_architecture(typed: str, arch: str) -> None:
    assert find_gpu(M, typed).arch.name == arch
