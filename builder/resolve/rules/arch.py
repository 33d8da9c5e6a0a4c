"""Rules on the GPU architectures: does the torch build carry code for every GPU, can its CUDA target them."""

from __future__ import annotations

from packaging.version import Version

from builder.core.archs import Arch
from builder.core.kinds import Platform
from builder.core.versions import minor_str
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.check import ArchSupport, Check, Missing, not_checked


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


_RANK = {ArchSupport.NATIVE: 0, ArchSupport.COMPATIBLE: 1, ArchSupport.PTX: 2, ArchSupport.NONE: 3}


def worst_support(
    archs: tuple[Arch, ...], sass: tuple[Arch, ...], ptx: tuple[Arch, ...]
) -> tuple[ArchSupport, Arch | None]:
    """The weakest support over every GPU the combination must run on (what the user will notice)."""
    found = [arch_support(a, sass, ptx) for a in archs]
    return max(found, key=lambda s: _RANK[s[0]])


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
    if c.variant.cuda is None:
        return Check("arch-torch", True, "CPU build: runs without a GPU", sources)
    if c.sass is None:
        return not_checked(
            "arch-torch",
            f"the compiled architectures of torch {c.local_version}{_on(c)} are not recorded (no source)",
            sources,
            Missing.FACT,
        )
    if not q.archs:
        return not_checked("arch-torch", "no GPU given", sources, Missing.INPUT, gpu_condition(c))
    reasons = []
    for arch in q.archs:
        support, code = arch_support(arch, c.sass, c.ptx)
        reason = _arch_reason(arch, support, code, c)
        if support is ArchSupport.NONE:
            return Check("arch-torch", False, reason, sources)
        reasons.append(reason)
    return Check("arch-torch", True, "; ".join(reasons), sources)


def gpu_condition(c: Combination) -> str:
    """What an unnamed GPU must be for this build to have code for it (its SASS and PTX lists)."""
    return f"a GPU the build has code for ({_code_list(c.sass or (), c.ptx)})"


def _on(c: Combination) -> str:
    return "" if c.platform is Platform.AMD64 else f" on {c.platform.value}"


def _arch_reason(arch: Arch, support: ArchSupport, code: Arch | None, c: Combination) -> str:
    gpu = arch.base.name
    if support is ArchSupport.NATIVE:
        return f"{gpu}: native SASS in torch {c.local_version}"
    if support is ArchSupport.COMPATIBLE:
        return f"{gpu} runs the {code} SASS (same major, lower minor)"
    if support is ArchSupport.PTX:
        return f"{gpu}: only PTX of {code}, JIT-compiled by the driver at first use"
    return f"{gpu} has no runnable code in torch {c.local_version} ({_code_list(c.sass or (), c.ptx)})"


def rule_arch_cuda(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("cmake-cuda-archs", "cuda13-dropped-archs")
    if c.variant.cuda is None:
        return Check("arch-cuda", True, "CPU build", sources)
    if not q.archs:
        condition = gpu_condition(c) if c.sass is not None else None
        return not_checked("arch-cuda", "no GPU given", sources, Missing.INPUT, condition)
    reasons = []
    for arch in q.archs:
        ok, reason = _arch_cuda(f, arch.base, c.variant.cuda)
        if not ok:
            return Check("arch-cuda", False, reason, sources)
        reasons.append(reason)
    return Check("arch-cuda", True, "; ".join(reasons), sources)


def _arch_cuda(f: Facts, gpu: Arch, cuda: Version) -> tuple[bool, str]:
    info = f.archs[gpu]
    if info.nvcc_supports(cuda):
        return True, f"CUDA {minor_str(cuda)} supports {info.name}"
    if info.nvcc_removed is not None and cuda >= info.nvcc_removed:
        return False, f"CUDA {info.nvcc_removed.major}.{info.nvcc_removed.minor}+ dropped {info.name} ({info.family})"
    # A toolkit older than the GPU still serves it through SASS of a lower minor of the same major
    # (binary compatibility: sm_89 runs sm_86 code built by CUDA 11.7), not across majors.
    elders = _targetable_same_major(f, gpu, cuda)
    if elders:
        names = " ".join(a.name for a in elders)
        return True, f"CUDA {minor_str(cuda)} predates {info.name} but targets {names}, whose SASS runs on {info.name}"
    return False, f"{info.name} ({info.family}) needs CUDA >= {info.nvcc_added}; this build is CUDA {minor_str(cuda)}"


def _targetable_same_major(f: Facts, gpu: Arch, cuda: Version) -> list[Arch]:
    """The lower-minor archs of the GPU's major that this CUDA can target (their SASS runs on the GPU)."""
    return sorted(
        a.arch
        for a in f.archs.values()
        if not a.arch.suffix and a.arch.major == gpu.major and a.arch.minor < gpu.minor and a.nvcc_supports(cuda)
    )
