"""Rules on cuDNN: a build for the CUDA major and a driver at its floor; code for the GPU architectures."""

from __future__ import annotations

from builder.core.archs import Arch
from builder.matrix.model import CudnnRange
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, DriverMode, Missing, not_checked
from builder.resolve.rules.driver import driver_mode


def rule_cudnn_cuda(f: Facts, q: Query, c: Combination) -> Check:
    v = c.variant
    sources = ("cudnn-9170", "cudnn-9102", "pytorch-release-md")
    if v.cuda is None:
        return Check("cudnn-cuda", True, "CPU build: no cuDNN", sources)
    found = f.cudnn_range(v.cudnn) if v.cudnn else None
    floor = found.driver_floor(v.cuda.major) if found else None
    unknown = _unrecorded_cuda(c, found, floor)
    if unknown:
        return not_checked("cudnn-cuda", unknown, sources, Missing.FACT)
    if found is None or v.cuda.major not in found.cuda_majors:
        return Check("cudnn-cuda", False, f"cuDNN {v.cudnn} has no CUDA {v.cuda.major} build", sources)
    if q.driver is None:
        return not_checked("cudnn-cuda", "no driver given", sources, Missing.INPUT, f"driver >= {floor}")
    # Forward compatibility replaces the user-mode driver (libcuda) with the cuda-compat one of the
    # variant's CUDA release, which meets cuDNN's floor for that major.
    below = floor is not None and not q.driver.at_least(floor)
    if below and driver_mode(f, q, v.cuda)[0] is not DriverMode.FORWARD_COMPAT:
        return Check("cudnn-cuda", False, f"cuDNN {v.cudnn} for CUDA {v.cuda.major} needs driver >= {floor}", sources)
    return Check(
        "cudnn-cuda", True, f"cuDNN {v.cudnn} has a CUDA {v.cuda.major} build (tested: {found.cuda_tested})", sources
    )


def _unrecorded_cuda(c: Combination, found: CudnnRange | None, floor: object) -> str | None:
    """What the matrix lacks to check cuDNN against the CUDA major and the driver (None: it has it all)."""
    v = c.variant
    assert v.cuda is not None
    if v.cudnn is None:
        return f"the cuDNN of torch {c.local_version} is not recorded"
    if found is None:
        return f"cuDNN {v.cudnn}'s CUDA builds are not recorded"
    if v.cuda.major in found.cuda_majors and floor is None:
        return f"cuDNN {v.cudnn}'s driver floor for CUDA {v.cuda.major} is not recorded"
    return None


def rule_cudnn_arch(f: Facts, q: Query, c: Combination) -> Check:
    v = c.variant
    sources = ("cudnn-9170", "cudnn-9102", "cudnn-951")
    if v.cuda is None:
        return Check("cudnn-arch", True, "CPU build", sources)
    found = f.cudnn_range(v.cudnn) if v.cudnn else None
    if found is None:
        what = f"cuDNN {v.cudnn}'s" if v.cudnn else f"the cuDNN of torch {c.local_version} and its"
        return not_checked("cudnn-arch", f"{what} architecture range is not recorded", sources, Missing.FACT)
    if not q.archs:
        return not_checked("cudnn-arch", "no GPU given", sources, Missing.INPUT, _range_condition(found, v.cudnn))
    reasons = []
    for arch in q.archs:
        ok, reason = _covers(found, v.cudnn, arch.base)
        if not ok:
            return Check("cudnn-arch", False, reason, sources)
        reasons.append(reason)
    if found.min_arch is None or found.max_arch is None:
        return not_checked("cudnn-arch", f"cuDNN {v.cudnn}'s architecture range is not recorded", sources, Missing.FACT)
    return Check("cudnn-arch", True, "; ".join(reasons), sources)


def _range_condition(found: CudnnRange, cudnn: object) -> str | None:
    if found.min_arch is None or found.max_arch is None:
        return None
    return f"a GPU within cuDNN {cudnn}'s range ({found.min_arch.name}..{found.max_arch.name})"


def _covers(found: CudnnRange, cudnn: object, gpu: Arch) -> tuple[bool, str]:
    if found.min_arch is not None and gpu.key < found.min_arch.key:
        return False, f"cuDNN {cudnn} starts at {found.min_arch.name}; {gpu.name} is older"
    top = found.max_arch
    if top is not None and gpu.key > top.key and gpu.major != top.major:
        return False, f"cuDNN {cudnn} has code up to {top.name}; {gpu.name} is newer"
    if found.min_arch is None or top is None:
        return True, f"cuDNN {cudnn}: range not recorded"
    return True, f"cuDNN {cudnn} covers {gpu.name} (range {found.min_arch.name}..{top.name})"
