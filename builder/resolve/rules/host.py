"""Rules on the machine the image runs on: the platform's wheels and GPUs, and the driver's supported GPUs."""

from __future__ import annotations

from builder.core.versions import Driver, describe_floors, meets_floors
from builder.matrix.model import Host
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.gpus import Gpu
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, Missing, not_checked

# Where PyTorch for Jetson comes from (NVIDIA's JetPack wheels and containers): a fact with a source in matrix.toml.
JETSON_SOURCE = "jetson-pytorch"


def rule_platform(f: Facts, q: Query, c: Combination) -> Check:
    """The wheel variant exists for the platform, and every GPU named sits in a host of that platform."""
    sources = ("pypi-torch", "gpu-hosts", JETSON_SOURCE)
    for gpu in q.gpus:
        problem = _host_problem(f, gpu, c)
        if problem:
            return Check("platform", False, problem, sources)
    if c.build is None:
        # Unknown is not no: the matrix records the builds a source lists; PyTorch's own index may hold more
        # (RELEASE.md lists aarch64 CUDA builds per CUDA version, not per release). Worded without the release,
        # so lookup groups the releases a variant misses on this platform.
        have = ", ".join(b.platform.value for b in c.variant.builds)
        return not_checked(
            "platform",
            f"{c.platform.value} {c.variant.name} wheels of this release are not recorded (recorded: {have})",
            (*sources, "pytorch-release-md"),
            Missing.FACT,
        )
    return Check("platform", True, f"torch {c.torch.version} {c.variant.name} has {c.platform.value} wheels", sources)


def _host_problem(f: Facts, gpu: Gpu, c: Combination) -> str | None:
    if gpu.host is Host.TEGRA:
        url = f.matrix.sources[JETSON_SOURCE].url if JETSON_SOURCE in f.matrix.sources else "NVIDIA's JetPack"
        return (
            f"{gpu.name} is a Jetson on L4T (Tegra): PyPI's manylinux wheels are built for x86_64 and Arm servers "
            f"(SBSA) and do not run there; PyTorch for Jetson comes from NVIDIA's JetPack wheels ({url})"
        )
    if gpu.host is Host.SBSA and c.platform.arch != "arm64":
        return f"{gpu.name} sits in a Grace (Arm, SBSA) system: it needs linux/arm64 images, not {c.platform.value}"
    return None


# Where first drivers and last branches come from: the GPU tables of the drivers (Ampere on) and NVIDIA's
# architecture matrix; then the sources of first drivers that the entries of the GPUs asked cite besides those:
# Table 3 of the CUDA release notes (the first toolkit's driver: Pascal, Volta, Turing), the R450 and R455 notes.
_SOURCES = ("nvidia-gpu-tables", "nvidia-arch-matrix")
_FLOOR_SOURCES = ("cuda-relnotes", "cuda-relnotes-legacy", "nvidia-dc-450", "r455-ampere")


def rule_driver_gpu(f: Facts, q: Query, c: Combination) -> Check:
    """The driver supports every GPU: not older than the first driver of its architecture (or product), and
    not past the last branch of a legacy architecture."""
    if c.variant.cuda is None:
        return Check("driver-gpu", True, "CPU build: no driver needed", _SOURCES)
    if not q.archs:
        return not_checked("driver-gpu", "no GPU given", _SOURCES, Missing.INPUT, "a driver that supports the GPU")
    sources = _driver_gpu_sources(f, q)
    windows = _windows(f, q)
    unknown = [n for n, fl, _, _ in windows if not fl]
    reasons = []
    for name, floor, last, family in windows:
        if q.driver is None:
            break
        ok, reason = _window(q.driver, name, floor, last, family)
        if not ok:  # past a legacy branch: the architecture matrix says it, not where the first driver came from
            legacy = last is not None and q.driver.branch > last
            return Check("driver-gpu", False, reason, _SOURCES if legacy else sources)
        reasons.append(reason)
    missing = _missing_fact(f, q, unknown)
    if missing is not None:
        return not_checked("driver-gpu", missing, sources, Missing.FACT)
    if q.driver is None:
        floors = "; ".join(f"{n} needs driver {describe_floors(fl)}" for n, fl, _, _ in windows)
        return not_checked("driver-gpu", "no driver given", sources, Missing.INPUT, floors)
    return Check("driver-gpu", True, "; ".join(reasons), sources)


def _driver_gpu_sources(f: Facts, q: Query) -> tuple[str, ...]:
    """The rule's sources, and the sources of first drivers that the GPUs' entries cite (in _FLOOR_SOURCES' order)."""
    cited = {s for a in q.archs for s in f.archs[a.base].sources} | {s for g in q.gpus for s in g.sources}
    return _SOURCES + tuple(s for s in _FLOOR_SOURCES if s in cited)


def _missing_fact(f: Facts, q: Query, unknown: list[str]) -> str | None:
    """What the matrix lacks to check the GPUs that did not fail: the driver's branch, when it is newer than every
    recorded one (a GPU past its legacy branch failed already: that much the matrix records), or first drivers."""
    beyond = f.unrecorded_driver(q.driver) if q.driver is not None else None
    if beyond is not None:
        return beyond
    return f"the first driver of {', '.join(unknown)} is not recorded" if unknown else None


def _windows(f: Facts, q: Query) -> list[tuple[str, tuple[Driver, ...], int | None, str]]:
    """(name, first drivers, last branch, family) for every GPU: by product where one is named (a product that
    arrived after its architecture has later floors of its own), else by architecture."""
    found = []
    named = {g.arch for g in q.gpus}
    for gpu in q.gpus:
        info = f.archs[gpu.arch.base]
        found.append((gpu.name, gpu.driver_min or info.driver_min, info.driver_last_branch, info.family))
    for arch in q.archs:
        if arch.base not in named:
            info = f.archs[arch.base]
            found.append((info.name, info.driver_min, info.driver_last_branch, info.family))
    return found


def _window(drv: Driver, name: str, floors: tuple[Driver, ...], last: int | None, family: str) -> tuple[bool, str]:
    if not meets_floors(drv, floors):
        return False, f"{name} ({family}) needs driver {describe_floors(floors)}; driver {drv.describe()} lacks it"
    if last is not None and drv.branch > last:
        return False, (
            f"{name} ({family}) is supported up to the {last} driver branch (legacy); "
            f"driver {drv.describe()} no longer supports it: use a {last}.x driver"
        )
    first = describe_floors(floors) if floors else "first driver not recorded"
    span = f"{first}, up to the {last} branch" if last else first
    return True, f"driver {drv.describe()} supports {name} ({family}: {span})"
