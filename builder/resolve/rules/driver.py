"""Rules on the driver and the CUDA of the build: full level, minor-version and forward compatibility, PTX JIT."""

from __future__ import annotations

from packaging.version import Version

from builder.core.kinds import GpuClass
from builder.core.versions import Driver, minor_str
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.arch import arch_support, gpu_condition
from builder.resolve.rules.check import ArchSupport, Check, DriverMode, Missing, not_checked


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
    consumer = [g.name for g in q.gpus if g.kind is GpuClass.CONSUMER]
    if consumer:
        return None, f"{failure}; forward compatibility is for data-center and Jetson GPUs, not {consumer[0]}"
    image = f.fc_image(cuda)
    if image is None:
        return None, f"{failure}; no sourced forward-compatibility driver branches for CUDA {minor_str(cuda)}"
    if q.driver.branch not in image.fc_branches:
        branches = ", ".join(map(str, image.fc_branches))
        return None, f"{failure}; forward compatibility for CUDA {minor_str(cuda)} supports branches {branches} only"
    gpu = q.gpus[0].name if q.gpus else "a data-center GPU (assumed: no --gpu given)"
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
        cuda = c.variant.cuda
        floor = f.mvc_floor(cuda.major) or f.full_driver(cuda)
        if floor is None:
            return not_checked(
                "driver-cuda", f"the driver floor of CUDA {minor_str(cuda)} is not recorded", sources, Missing.FACT
            )
        return not_checked("driver-cuda", "no driver given", sources, Missing.INPUT, f"driver >= {floor}")
    unrecorded = f.unrecorded_driver(q.driver)
    if unrecorded is not None:
        return not_checked("driver-cuda", unrecorded, sources, Missing.FACT)
    mode, reason = driver_mode(f, q, c.variant.cuda)
    return Check("driver-cuda", mode is not None, reason, sources)


def rule_ptx_driver(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("cuda-mvc",)
    cuda = c.variant.cuda
    if cuda is None:
        return Check("ptx-jit-driver", True, "CPU build: no PTX JIT", sources)
    if c.sass is None:
        return not_checked(
            "ptx-jit-driver", f"the compiled architectures of torch {c.local_version} are not recorded", sources,
            Missing.FACT,
        )  # fmt: skip
    if not q.archs:
        return not_checked("ptx-jit-driver", "no GPU given", sources, Missing.INPUT, gpu_condition(c))
    if not any(arch_support(a, c.sass, c.ptx)[0] is ArchSupport.PTX for a in q.archs):
        return Check("ptx-jit-driver", True, "no PTX JIT involved: the build has SASS for the GPU", sources)
    return _ptx_jit(f, q, cuda, sources)


def _ptx_jit(f: Facts, q: Query, cuda: Version, sources: tuple[str, ...]) -> Check:
    """A GPU the build serves only by PTX: the driver JIT-compiles it only at the build's full CUDA level."""
    full = f.full_driver(cuda)
    if q.driver is None:
        return not_checked(
            "ptx-jit-driver", "no driver given (the GPU runs only PTX)", sources, Missing.INPUT,
            f"driver >= {full} (full level, to JIT CUDA {minor_str(cuda)} PTX)",
        )  # fmt: skip
    unrecorded = f.unrecorded_driver(q.driver)
    if unrecorded is not None:
        return not_checked("ptx-jit-driver", unrecorded, sources, Missing.FACT)
    mode, _ = driver_mode(f, q, cuda)
    ok = mode is DriverMode.FULL
    reason = (
        f"the driver JIT-compiles CUDA {minor_str(cuda)} PTX at full level"
        if ok
        else f"PTX from CUDA {minor_str(cuda)} needs a driver at its full level (>= "
        f"{full}); minor-version compatibility cannot JIT it"
    )
    return Check("ptx-jit-driver", ok, reason, sources)
