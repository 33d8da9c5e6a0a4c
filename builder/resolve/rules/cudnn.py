"""Rules on cuDNN: a build for the CUDA major and a driver at its floor; code for the GPU architectures."""

from __future__ import annotations

from builder.core.archs import Arch
from builder.matrix.model import CudnnRange
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, DriverMode
from builder.resolve.rules.driver import driver_mode


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
    if not q.archs or v.cuda is None:
        return Check("cudnn-arch", True, "no --arch/--gpu given" if not q.archs else "CPU build", sources)
    found = f.cudnn_range(v.cudnn) if v.cudnn else None
    if found is None:
        return Check("cudnn-arch", False, f"the cuDNN of torch {c.local_version} is not recorded (no source)", sources)
    reasons = []
    for arch in q.archs:
        ok, reason = _covers(found, v.cudnn, arch.base)
        if not ok:
            return Check("cudnn-arch", False, reason, sources)
        reasons.append(reason)
    return Check("cudnn-arch", True, "; ".join(reasons), sources)


def _covers(found: CudnnRange, cudnn: object, gpu: Arch) -> tuple[bool, str]:
    if found.min_arch is not None and gpu.key < found.min_arch.key:
        return False, f"cuDNN {cudnn} starts at {found.min_arch.name}; {gpu.name} is older"
    top = found.max_arch
    if top is not None and gpu.key > top.key and gpu.major != top.major:
        return False, f"cuDNN {cudnn} has code up to {top.name}; {gpu.name} is newer"
    bounds = f"{found.min_arch.name if found.min_arch else '?'}..{top.name if top else '?'}"
    return True, f"cuDNN {cudnn} covers {gpu.name} (range {bounds})"
