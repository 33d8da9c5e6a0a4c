"""The compatibility rules, each a named function of (facts, query, combination) -> Check.

Sources for the rules are ids in matrix.toml's [sources]; docs/rules.md explains each rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from packaging.version import Version

from builder.archs import Arch
from builder.kinds import GpuClass
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.versions import Driver, minor_str


@dataclass(frozen=True)
class Check:
    """One rule's verdict on one combination, with its reason and source ids."""

    rule: str
    ok: bool
    reason: str
    sources: tuple[str, ...] = ()


class DriverMode(StrEnum):
    FULL = "full"
    MINOR_VERSION = "minor-version"
    FORWARD_COMPAT = "forward-compat"


class ArchSupport(StrEnum):
    NATIVE = "native"
    COMPATIBLE = "compatible"
    PTX = "ptx"
    NONE = "none"


Rule = Callable[[Facts, Query, Combination], Check]


# --- driver ----------------------------------------------------------------------------------------


def driver_mode(f: Facts, q: Query, cuda: Version) -> tuple[DriverMode | None, str]:
    """How a driver runs a CUDA major.minor build: full level, minor-version compat, forward compat, or not."""
    assert q.driver is not None
    drv, full = q.driver, f.full_driver(cuda)
    if full is not None and drv.at_least(full):
        return DriverMode.FULL, f"driver {drv.describe()} >= {full}: runs CUDA {minor_str(cuda)} at full feature level"
    floor = f.mvc_floor(cuda.major)
    if floor is not None and drv.at_least(floor):
        return DriverMode.MINOR_VERSION, (
            f"driver {drv.describe()} is below {full} (CUDA {minor_str(cuda)} at full level) but >= {floor}: "
            f"runs through minor-version compatibility (no PTX JIT from newer toolkits)"
        )
    failure = _driver_failure(drv, cuda, full, floor)
    if not q.forward_compat:
        return None, failure
    return _forward_compat(f, q, cuda, failure)


def _driver_failure(drv: Driver, cuda: Version, full: Driver | None, floor: Driver | None) -> str:
    if floor is not None:
        return f"driver {drv.describe()}: every CUDA {cuda.major} build needs >= {floor}"
    return f"driver {drv.describe()}: CUDA {minor_str(cuda)} needs >= {full} (no minor-version compatibility)"


def _forward_compat(f: Facts, q: Query, cuda: Version, failure: str) -> tuple[DriverMode | None, str]:
    assert q.driver is not None
    if q.gpu is not None and q.gpu.kind is GpuClass.CONSUMER:
        return None, f"{failure}; forward compatibility is for data-center and Jetson GPUs, not {q.gpu.name}"
    image = f.fc_image(cuda)
    if image is None:
        return None, f"{failure}; no sourced forward-compatibility driver branches for CUDA {minor_str(cuda)}"
    if q.driver.branch not in image.fc_branches:
        branches = ", ".join(map(str, image.fc_branches))
        return None, f"{failure}; forward compatibility for CUDA {minor_str(cuda)} supports branches {branches} only"
    gpu = q.gpu.name if q.gpu else "a data-center GPU (assumed: no --gpu given)"
    return DriverMode.FORWARD_COMPAT, (
        f"driver branch {q.driver.branch} runs CUDA {minor_str(cuda)} through forward compatibility on {gpu}; "
        f"the image needs the cuda-compat package (nvidia/cuda {image.cuda} carries it)"
    )


def rule_driver_cuda(f: Facts, q: Query, c: Combination) -> Check:
    # Forward compatibility: the branches an nvidia/cuda image excepts in NVIDIA_REQUIRE_CUDA.
    sources = ("cuda-relnotes", "cuda-mvc", "cuda-forward-compat", "nvidia-cuda-images", "container-toolkit")
    if c.variant.cuda is None:
        return Check("driver-cuda", True, "CPU build: no driver needed", sources)
    if q.driver is None:
        return Check(
            "driver-cuda",
            True,
            f"no --driver given (CUDA {minor_str(c.variant.cuda)} needs >= {f.mvc_floor(c.variant.cuda.major)})",
            sources,
        )
    mode, reason = driver_mode(f, q, c.variant.cuda)
    return Check("driver-cuda", mode is not None, reason, sources)


# --- architecture ----------------------------------------------------------------------------------


def arch_support(target: Arch, sass: tuple[Arch, ...], ptx: tuple[Arch, ...]) -> tuple[ArchSupport, Arch | None]:
    """Binary compatibility: exact SASS; same-major lower-minor SASS; PTX of an equal-or-lower arch.

    Arch-specific targets (sm_90a) run only on exactly that compute capability; family targets
    (sm_100f) only within their major, on equal or higher minors."""
    gpu = target.base
    runnable = [a for a in sass if _sass_runs(a, gpu)]
    native = [a for a in runnable if a.key == gpu.key]
    if native:
        return ArchSupport.NATIVE, min(native)  # the plain target sorts before its a/f variants
    if runnable:
        return ArchSupport.COMPATIBLE, max(runnable)
    jit = [a for a in ptx if _ptx_runs(a, gpu)]
    if jit:
        return ArchSupport.PTX, max(jit)
    return ArchSupport.NONE, None


def _sass_runs(code: Arch, gpu: Arch) -> bool:
    if code.suffix == "a":
        return code.key == gpu.key
    return code.major == gpu.major and code.minor <= gpu.minor


def _ptx_runs(code: Arch, gpu: Arch) -> bool:
    if code.suffix:
        return _sass_runs(code, gpu)
    return code.key <= gpu.key


def _code_list(sass: tuple[Arch, ...], ptx: tuple[Arch, ...]) -> str:
    names = " ".join(a.name for a in sass)
    return f"{names}; PTX {' '.join(a.name for a in ptx)}" if ptx else f"{names}; no PTX"


def rule_arch_torch(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("arch-suffixes", "pytorch-wheel-arch", "pytorch-ada")
    if q.arch is None:
        return Check("arch-torch", True, "no --arch/--gpu given", sources)
    if c.variant.cuda is None:
        return Check("arch-torch", True, "CPU build: runs without a GPU", sources)
    if c.variant.sass is None:
        return Check(
            "arch-torch",
            False,
            f"the compiled architectures of torch {c.local_version} are not recorded (no source)",
            sources,
        )
    support, code = arch_support(q.arch, c.variant.sass, c.variant.ptx)
    have = _code_list(c.variant.sass, c.variant.ptx)
    reasons = {
        ArchSupport.NATIVE: f"{q.arch.base.name}: native SASS in torch {c.local_version}",
        ArchSupport.COMPATIBLE: f"{q.arch.base.name} runs the {code} SASS (same major, lower minor)",
        ArchSupport.PTX: f"{q.arch.base.name}: only PTX of {code}, JIT-compiled by the driver at first use",
        ArchSupport.NONE: f"{q.arch.base.name} has no runnable code in torch {c.local_version} ({have})",
    }
    return Check("arch-torch", support is not ArchSupport.NONE, reasons[support], sources)


def rule_ptx_driver(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("cuda-mvc",)
    if q.arch is None or q.driver is None or c.variant.cuda is None or c.variant.sass is None:
        return Check("ptx-jit-driver", True, "no PTX JIT involved", sources)
    support, _ = arch_support(q.arch, c.variant.sass, c.variant.ptx)
    if support is not ArchSupport.PTX:
        return Check("ptx-jit-driver", True, "no PTX JIT involved", sources)
    mode, _ = driver_mode(f, q, c.variant.cuda)
    ok = mode is DriverMode.FULL
    reason = (
        f"the driver JIT-compiles CUDA {minor_str(c.variant.cuda)} PTX at full level"
        if ok
        else f"PTX from CUDA {minor_str(c.variant.cuda)} needs a driver at its full level (>= "
        f"{f.full_driver(c.variant.cuda)}); minor-version compatibility cannot JIT it"
    )
    return Check("ptx-jit-driver", ok, reason, sources)


def rule_arch_cuda(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("cmake-cuda-archs", "cuda13-dropped-archs")
    if q.arch is None or c.variant.cuda is None:
        return Check("arch-cuda", True, "no --arch/--gpu given" if q.arch is None else "CPU build", sources)
    info = f.archs[q.arch.base]
    cuda = c.variant.cuda
    if info.nvcc_supports(cuda):
        return Check("arch-cuda", True, f"CUDA {minor_str(cuda)} supports {info.name}", sources)
    if info.nvcc_removed is not None and cuda >= info.nvcc_removed:
        reason = f"CUDA {info.nvcc_removed.major}.{info.nvcc_removed.minor}+ dropped {info.name} ({info.family})"
        return Check("arch-cuda", False, reason, sources)
    # A toolkit older than the GPU still serves it through SASS of a lower minor of the same major
    # (binary compatibility: sm_89 runs sm_86 code built by CUDA 11.7), not across majors.
    elders = _targetable_same_major(f, q.arch.base, cuda)
    if elders:
        names = " ".join(a.name for a in elders)
        reason = f"CUDA {minor_str(cuda)} predates {info.name} but targets {names}, whose SASS runs on {info.name}"
        return Check("arch-cuda", True, reason, sources)
    reason = f"{info.name} ({info.family}) needs CUDA >= {info.nvcc_added}; this build is CUDA {minor_str(cuda)}"
    return Check("arch-cuda", False, reason, sources)


def _targetable_same_major(f: Facts, gpu: Arch, cuda: Version) -> list[Arch]:
    """The lower-minor archs of the GPU's major that this CUDA can target (their SASS runs on the GPU)."""
    return sorted(
        a.arch
        for a in f.archs.values()
        if not a.arch.suffix and a.arch.major == gpu.major and a.arch.minor < gpu.minor and a.nvcc_supports(cuda)
    )


# --- cuDNN -----------------------------------------------------------------------------------------


def rule_cudnn_cuda(f: Facts, q: Query, c: Combination) -> Check:
    v = c.variant
    sources = ("cudnn-9170", "cudnn-9102", "pytorch-release-md")
    if v.cuda is None:
        return Check("cudnn-cuda", True, "CPU build: no cuDNN", sources)
    if v.cudnn is None:
        return Check("cudnn-cuda", False, f"the cuDNN of torch {c.local_version} is not recorded (no source)", sources)
    found = f.cudnn_range(v.cudnn)
    if found is None or v.cuda.major not in found.cuda_majors:
        return Check("cudnn-cuda", False, f"cuDNN {v.cudnn} has no CUDA {v.cuda.major} build", sources)
    floor = found.driver_floor(v.cuda.major)
    # Forward compatibility replaces the user-mode driver (libcuda) with the cuda-compat one of the
    # variant's CUDA release, which meets cuDNN's floor for that major.
    below = q.driver is not None and floor is not None and not q.driver.at_least(floor)
    if below and driver_mode(f, q, v.cuda)[0] is not DriverMode.FORWARD_COMPAT:
        return Check("cudnn-cuda", False, f"cuDNN {v.cudnn} for CUDA {v.cuda.major} needs driver >= {floor}", sources)
    return Check(
        "cudnn-cuda", True, f"cuDNN {v.cudnn} has a CUDA {v.cuda.major} build (tested: {found.cuda_tested})", sources
    )


def rule_cudnn_arch(f: Facts, q: Query, c: Combination) -> Check:
    v = c.variant
    sources = ("cudnn-9170", "cudnn-9102", "cudnn-951")
    if q.arch is None or v.cuda is None:
        return Check("cudnn-arch", True, "no --arch/--gpu given" if q.arch is None else "CPU build", sources)
    found = f.cudnn_range(v.cudnn) if v.cudnn else None
    if found is None:
        return Check("cudnn-arch", False, f"the cuDNN of torch {c.local_version} is not recorded (no source)", sources)
    gpu = q.arch.base
    if found.min_arch is not None and gpu.key < found.min_arch.key:
        return Check(
            "cudnn-arch", False, f"cuDNN {v.cudnn} starts at {found.min_arch.name}; {gpu.name} is older", sources
        )
    top = found.max_arch
    if top is not None and gpu.key > top.key and gpu.major != top.major:
        return Check("cudnn-arch", False, f"cuDNN {v.cudnn} has code up to {top.name}; {gpu.name} is newer", sources)
    bounds = f"{found.min_arch.name if found.min_arch else '?'}..{top.name if top else '?'}"
    return Check("cudnn-arch", True, f"cuDNN {v.cudnn} covers {gpu.name} (range {bounds})", sources)


# --- Python, OS, companions ------------------------------------------------------------------------


def rule_python_torch(f: Facts, q: Query, c: Combination) -> Check:
    ok = c.python in c.torch.python
    have = f"{c.torch.python[0]}-{c.torch.python[-1]}"
    reason = (
        f"torch {c.torch.version} has cp{c.python.replace('.', '')} wheels"
        if ok
        else f"torch {c.torch.version} has no wheels for Python {c.python} (wheels: {have})"
    )
    return Check("python-torch", ok, reason, ("pypi-torch",))


def rule_python_os(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("distro-packages", "python-images")
    if c.python == c.os.system_python:
        return Check("python-os", True, f"{c.os.name} ships Python {c.python}", sources)
    if c.python in c.os.python_images:
        image = c.os.python_image.format(python=c.python)
        return Check("python-os", True, f"Python {c.python} from the official {image} image", sources)
    offered = ", ".join(c.os.pythons())
    return Check("python-os", False, f"{c.os.name} offers Python {offered}, not {c.python}", sources)


def rule_glibc_os(f: Facts, q: Query, c: Combination) -> Check:
    floor = f.glibc_floor(c.torch.platform_tag)
    sources = ("manylinux", "pypi-torch")
    if floor is None:
        return Check("glibc-os", False, f"unknown platform tag {c.torch.platform_tag}", sources)
    ok = c.os.glibc >= floor
    verdict = ">=" if ok else "<"
    return Check("glibc-os", ok, f"{c.os.name} glibc {c.os.glibc} {verdict} {floor} ({c.torch.platform_tag})", sources)


def rule_companions(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("pypi-torchvision", "pypi-torchaudio")
    for name, version in (("torchvision", c.torch.torchvision), ("torchaudio", c.torch.torchaudio)):
        problem = f.companion_problem(f.companions[name, version], c.torch.version, c.python)
        if problem is not None:
            return Check("companions", False, problem, sources)
    return Check(
        "companions",
        True,
        f"torchvision {c.torch.torchvision} and torchaudio {c.torch.torchaudio} "
        f"accept torch {c.torch.version} on Python {c.python}",
        sources,
    )


# Rules that depend only on the torch release and wheel variant (evaluated once per variant), then
# rules that also look at the Python and the OS base.
VARIANT_RULES: tuple[Rule, ...] = (
    rule_driver_cuda,
    rule_arch_torch,
    rule_ptx_driver,
    rule_arch_cuda,
    rule_cudnn_cuda,
    rule_cudnn_arch,
)
COMBO_RULES: tuple[Rule, ...] = (rule_python_torch, rule_python_os, rule_glibc_os, rule_companions)
RULES: tuple[Rule, ...] = VARIANT_RULES + COMBO_RULES
