"""Rule reasons word for word where the rule tests check only a part: driver-gpu's ranges and its unrecorded GPUs,
the Jetson refusal without a recorded source, arch-cuda's same-major code, the weakest support over several GPUs,
and why forward compatibility did not help (written for the survivors of mutmut on builder/resolve/rules/)."""

from __future__ import annotations

from dataclasses import replace

from matrix_kit import BASE, combo, edit, query, real, small
from packaging.version import Version

from builder.core.archs import parse_arch
from builder.resolve import rules
from builder.resolve.facts import Facts
from builder.resolve.rules import ArchSupport, Check, driver_mode, worst_support
from builder.resolve.rules.check import Missing, not_checked

M = real()
S = small()
DRIVER_GPU_SOURCES = ("nvidia-gpu-tables", "nvidia-arch-matrix")


def test_driver_gpu_names_each_gpus_range_with_its_last_branch_where_it_has_one() -> None:
    # test values: sm_37 with a first driver and a last branch (legacy), sm_86 with a first driver only
    text = edit(BASE, 'family = "Kepler"\n', 'family = "Kepler"\ndriver_min = "418.39"\ndriver_last_branch = 470\n')
    ranged = small(edit(text, 'family = "Ampere"\n', 'family = "Ampere"\ndriver_min = "455.23.04"\n'))
    q = query(ranged, driver="470", gpu=("Tesla K80", "RTX 3090"))
    drv = "driver 470 (any 470.x, read as the newest)"
    assert rules.rule_driver_gpu(Facts(ranged), q, combo(ranged, "2.5.1", "cu118")) == Check(
        "driver-gpu",
        True,
        f"{drv} supports Tesla K80 (Kepler: >= 418.39, up to the 470 branch); "
        f"{drv} supports GeForce RTX 3090 (Ampere: >= 455.23.04)",
        DRIVER_GPU_SOURCES,
    )


def test_driver_gpu_names_every_gpu_whose_first_driver_is_not_recorded() -> None:
    q = query(S, driver="470", gpu=("RTX 4090", "RTX 3090"))
    assert rules.rule_driver_gpu(Facts(S), q, combo(S, "2.5.1", "cu118")) == not_checked(
        "driver-gpu",
        "the first driver of GeForce RTX 4090, GeForce RTX 3090 is not recorded",
        DRIVER_GPU_SOURCES,
        Missing.FACT,
    )


def test_a_jetson_without_a_recorded_jetson_source_is_sent_to_jetpack() -> None:
    unsourced = replace(M, sources={k: v for k, v in M.sources.items() if k != "jetson-pytorch"})
    check = rules.rule_platform(Facts(unsourced), query(M, gpu="Jetson AGX Orin"), combo(M, "2.14.1", "cu126"))
    assert check == Check(
        "platform",
        False,
        "Jetson AGX Orin is a Jetson on L4T (Tegra): PyPI's manylinux wheels are built for x86_64 and Arm servers "
        "(SBSA) and do not run there; PyTorch for Jetson comes from NVIDIA's JetPack wheels (NVIDIA's JetPack)",
        ("pypi-torch", "gpu-hosts", "jetson-pytorch"),
    )


def test_a_toolkit_older_than_the_gpu_names_the_same_major_archs_it_targets() -> None:
    # CUDA 11.7 predates Ada (11.8); it targets sm_80, sm_86 and sm_87, not the lower minors of other majors
    check = rules.rule_arch_cuda(Facts(M), query(M, gpu="RTX 4090"), combo(M, "1.13.1", "cu117"))
    assert check == Check(
        "arch-cuda",
        True,
        "CUDA 11.7 predates sm_89 but targets sm_80 sm_86 sm_87, whose SASS runs on sm_89",
        ("cmake-cuda-archs", "cuda13-dropped-archs"),
    )


def test_worst_support_is_the_weakest_by_rank_not_by_name() -> None:
    sm = parse_arch
    # compatible (sm_89 on sm_86 code) is weaker than native, none weaker than PTX, whichever GPU comes first
    assert worst_support((sm("sm_86"), sm("sm_89")), (sm("sm_86"),), ()) == (ArchSupport.COMPATIBLE, sm("sm_86"))
    assert worst_support((sm("sm_89"), sm("sm_86")), (sm("sm_86"),), ()) == (ArchSupport.COMPATIBLE, sm("sm_86"))
    assert worst_support((sm("sm_90"), sm("sm_37")), (sm("sm_86"),), (sm("sm_86"),)) == (ArchSupport.NONE, None)


def test_forward_compat_that_cannot_help_keeps_why_the_driver_failed() -> None:
    failure = "driver 520 (any 520.x, read as the newest): every CUDA 12 build needs >= 525.60.13"
    h100 = query(S, driver="520", gpu="NVIDIA H100", forward_compat=True)
    assert driver_mode(Facts(S), h100, Version("12.4")) == (
        None,
        f"{failure}; forward compatibility for CUDA 12.4 supports branches 525 only",
    )
    geforce = query(S, driver="520", gpu="RTX 4090", forward_compat=True)
    assert driver_mode(Facts(S), geforce, Version("12.4")) == (
        None,
        f"{failure}; forward compatibility is for data-center and Jetson GPUs, not GeForce RTX 4090",
    )


def test_no_runnable_code_lists_the_builds_sass_and_ptx() -> None:
    with_ptx = small(edit(BASE, 'sass = ["8.6", "9.0"]\n', 'sass = ["8.6", "9.0"]\nptx = ["8.6", "9.0"]\n'))
    check = rules.rule_arch_torch(Facts(with_ptx), query(with_ptx, gpu="Tesla K80"), combo(with_ptx, "2.5.1", "cu124"))
    assert check == Check(
        "arch-torch",
        False,
        "sm_37 has no runnable code in torch 2.5.1+cu124 (sm_86 sm_90; PTX sm_86 sm_90)",
        ("arch-suffixes", "pytorch-wheel-arch", "pytorch-ada"),
    )


def test_unrecorded_code_of_a_build_names_its_platform() -> None:
    arm = combo(M, "2.14.1", "cu126", platform="linux/arm64")
    assert rules.rule_arch_torch(Facts(M), query(M, gpu="GH200"), arm) == not_checked(
        "arch-torch",
        "the compiled architectures of torch 2.14.1+cu126 on linux/arm64 are not recorded (no source)",
        ("arch-suffixes", "pytorch-wheel-arch", "pytorch-ada"),
        Missing.FACT,
    )


def test_a_cudnn_in_no_recorded_range_is_not_checked() -> None:
    cu124 = combo(S, "2.5.1", "cu124")
    cudnn_8 = replace(cu124, variant=replace(cu124.variant, cudnn=Version("8.9.2.26")))
    assert rules.rule_cudnn_cuda(Facts(S), query(S, driver="550"), cudnn_8) == not_checked(
        "cudnn-cuda",
        "cuDNN 8.9.2.26's CUDA builds are not recorded",
        ("cudnn-9170", "cudnn-9102", "pytorch-release-md"),
        Missing.FACT,
    )


CUDNN_ARCH_SOURCES = ("cudnn-9170", "cudnn-9102", "cudnn-951")


def test_cudnn_arch_of_a_cpu_build_an_unrecorded_cudnn_and_no_gpu() -> None:
    f, cu124 = Facts(S), combo(S, "2.5.1", "cu124")
    assert rules.rule_cudnn_arch(f, query(S), combo(S, "2.5.1", "cpu")) == Check(
        "cudnn-arch", True, "CPU build", CUDNN_ARCH_SOURCES
    )
    no_cudnn = replace(cu124, variant=replace(cu124.variant, cudnn=None))
    assert rules.rule_cudnn_arch(f, query(S), no_cudnn) == not_checked(
        "cudnn-arch",
        "the cuDNN of torch 2.5.1+cu124 and its architecture range is not recorded",
        CUDNN_ARCH_SOURCES,
        Missing.FACT,
    )
    cudnn_8 = replace(cu124, variant=replace(cu124.variant, cudnn=Version("8.9.2.26")))
    assert rules.rule_cudnn_arch(f, query(S), cudnn_8) == not_checked(
        "cudnn-arch", "cuDNN 8.9.2.26's architecture range is not recorded", CUDNN_ARCH_SOURCES, Missing.FACT
    )
    assert rules.rule_cudnn_arch(f, query(S), cu124) == not_checked(
        "cudnn-arch",
        "no GPU given",
        CUDNN_ARCH_SOURCES,
        Missing.INPUT,
        "a GPU within cuDNN 9.1.0.70's range (sm_50..sm_90)",
    )


def test_cudnn_arch_fails_passes_every_gpu_or_lacks_a_bound() -> None:
    f, cu124 = Facts(S), combo(S, "2.5.1", "cu124")
    assert rules.rule_cudnn_arch(f, query(S, gpu="Tesla K80"), cu124) == Check(
        "cudnn-arch", False, "cuDNN 9.1.0.70 starts at sm_50; sm_37 is older", CUDNN_ARCH_SOURCES
    )
    assert rules.rule_cudnn_arch(f, query(S, arch=("sm_86", "sm_89")), cu124) == Check(
        "cudnn-arch",
        True,
        "cuDNN 9.1.0.70 covers sm_86 (range sm_50..sm_90); cuDNN 9.1.0.70 covers sm_89 (range sm_50..sm_90)",
        CUDNN_ARCH_SOURCES,
    )
    no_top = small(edit(BASE, 'max_arch = "9.0"\n', ""))
    check = rules.rule_cudnn_arch(Facts(no_top), query(no_top, arch="sm_86"), combo(no_top, "2.5.1", "cu124"))
    assert check == not_checked(
        "cudnn-arch", "cuDNN 9.1.0.70's architecture range is not recorded", CUDNN_ARCH_SOURCES, Missing.FACT
    )


def test_arch_cuda_of_a_cpu_build() -> None:
    assert rules.rule_arch_cuda(Facts(S), query(S, gpu="RTX 4090"), combo(S, "2.5.1", "cpu")) == Check(
        "arch-cuda", True, "CPU build", ("cmake-cuda-archs", "cuda13-dropped-archs")
    )
