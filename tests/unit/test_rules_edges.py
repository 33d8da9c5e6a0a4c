"""Rule reasons word for word where the rule tests check only a part: driver-gpu's ranges and its unrecorded GPUs,
the Jetson refusal without a recorded source, arch-cuda's same-major code, the weakest support over several GPUs,
and why forward compatibility did not help (written for the survivors of mutmut on builder/resolve/rules/)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

from matrix_kit import BASE, combo, edit, query, real, small
from packaging.version import Version

from builder.core.archs import Arch, parse_arch
from builder.core.versions import parse_driver
from builder.matrix.model import TorchVariant
from builder.resolve import rules
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules import ArchSupport, Check, driver_mode, worst_support
from builder.resolve.rules.check import Missing, not_checked

M = real()
S = small()
DRIVER_GPU_SOURCES = ("nvidia-gpu-tables", "nvidia-arch-matrix")


def on_real(
    rule: Callable[[Facts, Query, Combination], Check], c: Combination, **flags: str | bool | tuple[str, ...]
) -> Check:
    """A rule's answer on the real matrix, the query given as the CLI's flags."""
    return rule(Facts(M), query(M, **flags), c)


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


ARCH_CUDA_SOURCES = ("cmake-cuda-archs", "cuda13-dropped-archs")


def test_arch_cuda_without_a_gpu_names_the_code_the_build_has_where_it_is_recorded() -> None:
    amd = combo(M, "2.14.1", "cu126")
    assert rules.rule_arch_cuda(Facts(M), query(M), amd) == not_checked(
        "arch-cuda",
        "no GPU given",
        ARCH_CUDA_SOURCES,
        Missing.INPUT,
        "a GPU the build has code for (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90; no PTX)",
    )
    # arm64's compiled architectures are not recorded for this build: no condition rather than an empty list
    arm = combo(M, "2.14.1", "cu126", platform="linux/arm64")
    assert rules.rule_arch_cuda(Facts(M), query(M), arm) == not_checked(
        "arch-cuda", "no GPU given", ARCH_CUDA_SOURCES, Missing.INPUT
    )


def test_arch_cuda_fails_on_the_first_gpu_its_toolkit_dropped() -> None:
    dropped = Check("arch-cuda", False, "CUDA 12.0+ dropped sm_37 (Kepler)", ARCH_CUDA_SOURCES)
    cu126 = combo(M, "2.14.1", "cu126")
    assert rules.rule_arch_cuda(Facts(M), query(M, gpu="Tesla K80"), cu126) == dropped
    assert rules.rule_arch_cuda(Facts(M), query(M, gpu=("RTX 4090", "Tesla K80")), cu126) == dropped
    both = rules.rule_arch_cuda(Facts(M), query(M, gpu=("RTX 4090", "H100")), cu126)
    assert both == Check("arch-cuda", True, "CUDA 12.6 supports sm_89; CUDA 12.6 supports sm_90", ARCH_CUDA_SOURCES)


PTX = ("cuda-mvc",)


def test_ptx_driver_says_why_it_had_nothing_to_check() -> None:
    cu126 = combo(M, "2.14.1", "cu126")
    assert rules.rule_ptx_driver(Facts(M), query(M), combo(M, "2.14.1", "cpu")) == Check(
        "ptx-jit-driver", True, "CPU build: no PTX JIT", PTX
    )
    arm = combo(M, "2.14.1", "cu126", platform="linux/arm64")
    assert rules.rule_ptx_driver(Facts(M), query(M, gpu="GH200"), arm) == not_checked(
        "ptx-jit-driver", "the compiled architectures of torch 2.14.1+cu126 are not recorded", PTX, Missing.FACT
    )
    assert rules.rule_ptx_driver(Facts(M), query(M), cu126) == not_checked(
        "ptx-jit-driver",
        "no GPU given",
        PTX,
        Missing.INPUT,
        "a GPU the build has code for (sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90; no PTX)",
    )
    assert rules.rule_ptx_driver(Facts(M), query(M, gpu="RTX 4090", driver="535"), cu126) == Check(
        "ptx-jit-driver", True, "no PTX JIT involved: the build has SASS for the GPU", PTX
    )


def test_ptx_driver_for_a_gpu_that_runs_only_ptx() -> None:
    # sm_130 (hypothetical, past Blackwell) runs only 2.8 cu129's compute_120 PTX
    cu129 = combo(M, "2.8.0", "cu129")
    future = Arch(13, 0)
    assert rules.rule_ptx_driver(Facts(M), Query(archs=(future,)), cu129) == not_checked(
        "ptx-jit-driver",
        "no driver given (the GPU runs only PTX)",
        PTX,
        Missing.INPUT,
        "driver >= 575.51.03 (full level, to JIT CUDA 12.9 PTX)",
    )
    full = Query(driver=parse_driver("575"), archs=(future,))
    assert rules.rule_ptx_driver(Facts(M), full, cu129) == Check(
        "ptx-jit-driver", True, "the driver JIT-compiles CUDA 12.9 PTX at full level", PTX
    )
    minor = Query(driver=parse_driver("570.124.06"), archs=(future,))
    assert rules.rule_ptx_driver(Facts(M), minor, cu129) == Check(
        "ptx-jit-driver",
        False,
        "PTX from CUDA 12.9 needs a driver at its full level (>= 575.51.03); minor-version compatibility cannot JIT it",
        PTX,
    )


CUDNN_CUDA = ("cudnn-9170", "cudnn-9102", "pytorch-release-md")


def test_cudnn_cuda_word_for_word_on_each_path() -> None:
    cu126 = combo(M, "2.14.1", "cu126")  # cuDNN 9.10.2.21: CUDA 11 and 12 builds, >= 525.60.13 for CUDA 12

    def as_(variant: TorchVariant) -> Combination:
        return replace(cu126, variant=variant)

    check = partial(on_real, rules.rule_cudnn_cuda)

    assert check(combo(M, "2.14.1", "cpu")) == Check("cudnn-cuda", True, "CPU build: no cuDNN", CUDNN_CUDA)
    assert check(as_(replace(cu126.variant, cudnn=None)), driver="550") == not_checked(
        "cudnn-cuda", "the cuDNN of torch 2.14.1+cu126 is not recorded", CUDNN_CUDA, Missing.FACT
    )
    assert check(as_(replace(cu126.variant, cuda=Version("13.0"))), driver="580") == Check(
        "cudnn-cuda", False, "cuDNN 9.10.2.21 has no CUDA 13 build", CUDNN_CUDA
    )
    assert check(cu126) == not_checked(
        "cudnn-cuda", "no driver given", CUDNN_CUDA, Missing.INPUT, "driver >= 525.60.13"
    )
    assert check(cu126, driver="520") == Check(
        "cudnn-cuda", False, "cuDNN 9.10.2.21 for CUDA 12 needs driver >= 525.60.13", CUDNN_CUDA
    )
    ok = Check("cudnn-cuda", True, "cuDNN 9.10.2.21 has a CUDA 12 build (tested: 11.8; 12.0-12.9)", CUDNN_CUDA)
    assert check(cu126, driver="550") == ok
    # below the floor, but forward compatibility brings CUDA 12.6's own libcuda, which meets it
    assert check(cu126, driver="470", gpu="A100", forward_compat=True) == ok


def test_cudnn_cuda_without_a_recorded_floor_for_the_major_is_not_checked() -> None:
    text = edit(
        BASE, 'min_driver = { cuda11 = "450.80.02", cuda12 = "525.60.13" }', 'min_driver = { cuda11 = "450.80.02" }'
    )
    floorless = small(text)
    check = rules.rule_cudnn_cuda(Facts(floorless), query(floorless, driver="550"), combo(floorless, "2.5.1", "cu124"))
    assert check == not_checked(
        "cudnn-cuda", "cuDNN 9.1.0.70's driver floor for CUDA 12 is not recorded", CUDNN_CUDA, Missing.FACT
    )


ARCH_TORCH = ("arch-suffixes", "pytorch-wheel-arch", "pytorch-ada")
CU126_CODE = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90; no PTX"  # torch 2.14.1+cu126's SASS on linux/amd64


def test_arch_torch_word_for_word_on_each_path() -> None:
    cu126 = combo(M, "2.14.1", "cu126")
    arm = combo(M, "2.14.1", "cu126", platform="linux/arm64")

    check = partial(on_real, rules.rule_arch_torch)

    assert check(combo(M, "2.14.1", "cpu"), gpu="RTX 4090") == Check(
        "arch-torch", True, "CPU build: runs without a GPU", ARCH_TORCH
    )
    assert check(arm, gpu="GH200") == not_checked(
        "arch-torch",
        "the compiled architectures of torch 2.14.1+cu126 on linux/arm64 are not recorded (no source)",
        ARCH_TORCH,
        Missing.FACT,
    )
    assert check(cu126) == not_checked(
        "arch-torch", "no GPU given", ARCH_TORCH, Missing.INPUT, f"a GPU the build has code for ({CU126_CODE})"
    )
    assert check(cu126, gpu=("RTX 4090", "H100")) == Check(
        "arch-torch",
        True,
        "sm_89 runs the sm_86 SASS (same major, lower minor); sm_90: native SASS in torch 2.14.1+cu126",
        ARCH_TORCH,
    )
    # the first GPU without code decides, whatever comes before or after it
    assert check(cu126, gpu=("RTX 4090", "Tesla K80", "H100")) == Check(
        "arch-torch", False, f"sm_37 has no runnable code in torch 2.14.1+cu126 ({CU126_CODE})", ARCH_TORCH
    )


DRIVER_CUDA = ("cuda-relnotes", "cuda-mvc", "cuda-forward-compat", "nvidia-cuda-images", "container-toolkit")


def test_driver_cuda_word_for_word_on_each_path() -> None:
    cu126 = combo(M, "2.14.1", "cu126")

    check = partial(on_real, rules.rule_driver_cuda)

    assert check(combo(M, "2.14.1", "cpu")) == Check("driver-cuda", True, "CPU build: no driver needed", DRIVER_CUDA)
    # without a driver, the floor is minor-version compatibility's for the major
    assert check(cu126) == not_checked(
        "driver-cuda", "no driver given", DRIVER_CUDA, Missing.INPUT, "driver >= 525.60.13"
    )
    assert check(combo(M, "2.14.1", "cu130")) == not_checked(
        "driver-cuda", "no driver given", DRIVER_CUDA, Missing.INPUT, "driver >= 580.65.06"
    )
    assert check(cu126, driver="520") == Check(
        "driver-cuda",
        False,
        "driver 520 (any 520.x, read as the newest): every CUDA 12 build needs >= 525.60.13",
        DRIVER_CUDA,
    )
    assert check(cu126, driver="550") == Check(
        "driver-cuda",
        True,
        "driver 550 (any 550.x, read as the newest) is below 560.28.03 (CUDA 12.6 at full level) but >= 525.60.13: "
        "runs through minor-version compatibility (no PTX JIT from newer toolkits)",
        DRIVER_CUDA,
    )


def test_driver_cuda_without_a_driver_falls_back_to_the_full_level_then_to_not_recorded() -> None:
    no_mvc = small(edit(BASE, 'major = 12\nmvc_min_driver = "525.60.13"\n', "major = 12\n"))
    cu124 = combo(no_mvc, "2.5.1", "cu124")
    check = rules.rule_driver_cuda(Facts(no_mvc), query(no_mvc), cu124)
    assert check == not_checked("driver-cuda", "no driver given", DRIVER_CUDA, Missing.INPUT, "driver >= 550.54.15")
    cuda_13 = replace(cu124, variant=replace(cu124.variant, cuda=Version("13.0")))
    assert rules.rule_driver_cuda(Facts(S), query(S), cuda_13) == not_checked(
        "driver-cuda", "the driver floor of CUDA 13.0 is not recorded", DRIVER_CUDA, Missing.FACT
    )


DRIVER = "driver 550 (any 550.x, read as the newest)"


def test_driver_gpu_word_for_word_on_each_path() -> None:
    cu126 = combo(M, "2.14.1", "cu126")

    check = partial(on_real, rules.rule_driver_gpu)

    assert check(combo(M, "2.14.1", "cpu"), gpu="RTX 4090") == Check(
        "driver-gpu", True, "CPU build: no driver needed", DRIVER_GPU_SOURCES
    )
    assert check(cu126, driver="550") == not_checked(
        "driver-gpu", "no GPU given", DRIVER_GPU_SOURCES, Missing.INPUT, "a driver that supports the GPU"
    )
    assert check(cu126, gpu=("RTX 4090", "H100")) == not_checked(
        "driver-gpu",
        "no driver given",
        DRIVER_GPU_SOURCES,
        Missing.INPUT,
        "GeForce RTX 4090 needs driver >= 520.56.06; NVIDIA H100 needs driver >= 520.56.06",
    )
    assert check(cu126, driver="550", gpu=("RTX 4090", "H100")) == Check(
        "driver-gpu",
        True,
        f"{DRIVER} supports GeForce RTX 4090 (Ada Lovelace: >= 520.56.06); "
        f"{DRIVER} supports NVIDIA H100 (Hopper: >= 520.56.06)",
        DRIVER_GPU_SOURCES,
    )
    # an --arch without a named GPU goes by the architecture's name
    assert check(cu126, driver="550", arch="sm_90") == Check(
        "driver-gpu", True, f"{DRIVER} supports sm_90 (Hopper: >= 520.56.06)", DRIVER_GPU_SOURCES
    )


def test_driver_gpu_fails_on_a_driver_too_old_or_past_a_legacy_branch() -> None:
    cu126 = combo(M, "2.14.1", "cu126")
    old = query(M, driver="470", gpu=("H100", "RTX 4090"))
    assert rules.rule_driver_gpu(Facts(M), old, cu126) == Check(
        "driver-gpu",
        False,
        "NVIDIA H100 (Hopper) needs driver >= 520.56.06; driver 470 (any 470.x, read as the newest) lacks it",
        DRIVER_GPU_SOURCES,
    )
    assert rules.rule_driver_gpu(Facts(M), query(M, driver="550", gpu=("RTX 4090", "Tesla K80")), cu126) == Check(
        "driver-gpu",
        False,
        f"Tesla K80 (Kepler) is supported up to the 470 driver branch (legacy); {DRIVER} no longer supports it: "
        "use a 470.x driver",
        DRIVER_GPU_SOURCES,
    )


PLATFORM = ("pypi-torch", "gpu-hosts", "jetson-pytorch")


def test_platform_word_for_word_on_each_path() -> None:
    cu126 = combo(M, "2.14.1", "cu126")
    arm = combo(M, "2.14.1", "cu126", platform="linux/arm64")

    check = partial(on_real, rules.rule_platform)

    assert check(cu126, gpu="RTX 4090") == Check(
        "platform", True, "torch 2.14.1 cu126 has linux/amd64 wheels", PLATFORM
    )
    assert check(cu126, gpu=("H100", "GH200")) == Check(
        "platform",
        False,
        "NVIDIA GH200 sits in a Grace (Arm, SBSA) system: it needs linux/arm64 images, not linux/amd64",
        PLATFORM,
    )
    assert check(arm, gpu="GH200") == not_checked(
        "platform",
        "linux/arm64 cu126 wheels of this release are not recorded (recorded: linux/amd64)",
        (*PLATFORM, "pytorch-release-md"),
        Missing.FACT,
    )
