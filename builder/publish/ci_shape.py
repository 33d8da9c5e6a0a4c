"""Where the exported CI jobs run: the build runners, the GPU runner classes, and the driver those need.

A GPU class is a set of runner labels and the architecture of its GPUs, named by the team: an architecture
(`sm_90`), a data-center GPU the matrix lists (`h100`: its architecture) or a GPU family (`hopper`: every
architecture of the family that has data-center GPUs). Each CUDA image gets one GPU smoke leg per class whose
GPUs its torch build carries code for (SASS that runs there or PTX, by the resolver's rule); a build whose code
list matrix.toml does not record gets a leg on every class (the smoke suite decides there). A class whose labels
include `arm64` takes the linux/arm64 images, the others the linux/amd64 ones. Without classes, today's: every
CUDA image on `self-hosted, gpu` (`self-hosted, gpu, arm64` for arm64), whatever its GPUs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.core.archs import Arch, arch_from
from builder.core.errors import UsageError
from builder.core.kinds import Platform, did_you_mean
from builder.core.versions import Driver
from builder.matrix.model import Matrix
from builder.resolve.rules.arch import arch_support
from builder.resolve.rules.check import ArchSupport

if TYPE_CHECKING:
    from builder.publish.items import Item

HOSTED_RUNNER = ("ubuntu-latest",)
ARM_RUNNER = ("ubuntu-24.04-arm",)  # GitHub's hosted arm64 runner: arm64 images build natively, not emulated
ARM64 = "arm64"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class GpuClass:
    name: str
    labels: tuple[str, ...]
    archs: tuple[Arch, ...] | None  # None: any GPU (the default classes)

    @property
    def platform(self) -> Platform:
        return Platform.ARM64 if ARM64 in self.labels else Platform.AMD64

    def runs(self, item: Item) -> bool:
        """Whether the item's torch carries code for every architecture of this class's GPUs (not recorded:
        yes, the smoke suite there decides)."""
        c = item.combo
        if c.platform is not self.platform:
            return False
        if self.archs is None or c.sass is None:
            return True
        return all(arch_support(a, c.sass, c.ptx)[0] is not ArchSupport.NONE for a in self.archs)


DEFAULT_GPU_CLASSES = (
    GpuClass("gpu", ("self-hosted", "gpu"), None),
    GpuClass("gpu-arm64", ("self-hosted", "gpu", ARM64), None),  # a Grace machine (GH200, GB200, DGX Spark)
)


@dataclass(frozen=True, kw_only=True)
class CiShape:
    runner: tuple[str, ...] = HOSTED_RUNNER
    arm_runner: tuple[str, ...] = ARM_RUNNER
    gpu_classes: tuple[GpuClass, ...] = DEFAULT_GPU_CLASSES

    def build_runner(self, item: Item) -> tuple[str, ...]:
        return self.arm_runner if item.combo.platform is Platform.ARM64 else self.runner

    def classes_for(self, item: Item) -> tuple[GpuClass, ...]:
        """The classes an image's GPU smoke runs on; a CUDA image none can run is refused (it would be
        published with no GPU check at all)."""
        found = tuple(g for g in self.gpu_classes if g.runs(item))
        if not found:
            code = " ".join(a.name for a in item.combo.sass or ())
            raise UsageError(
                f"{item.id}: no GPU runner class runs it (classes: {', '.join(g.name for g in self.gpu_classes)}; "
                f"its torch carries code for {code}); add a --gpu-runner for one of those, or narrow the publish set"
            )
        return found


def runs_on(labels: tuple[str, ...]) -> str | list[str]:
    """`runs-on`: one label as a string, several as a list (a runner that has them all)."""
    return labels[0] if len(labels) == 1 else list(labels)


def hosted(labels: tuple[str, ...]) -> bool:
    return "self-hosted" not in labels


def parse_runner(text: str, flag: str = "--runner") -> tuple[str, ...]:
    labels = tuple(part.strip() for part in text.split(","))
    if not all(labels):
        raise UsageError(f"{flag}: {text!r}: expected runner labels like self-hosted,gpu,a100")
    return labels


def parse_gpu_runner(text: str) -> tuple[str, tuple[str, ...]]:
    """`CLASS=LABEL[,LABEL]`, e.g. `hopper=self-hosted,gpu,h100`."""
    name, sep, labels = text.partition("=")
    if not sep or not _NAME.fullmatch(name.strip()):
        raise UsageError(f"--gpu-runner: {text!r}: expected CLASS=LABEL[,LABEL] like hopper=self-hosted,gpu,h100")
    return name.strip(), parse_runner(labels, "--gpu-runner")


def gpu_class(m: Matrix, name: str, labels: tuple[str, ...]) -> GpuClass:
    """A class by an architecture, a data-center GPU or a GPU family the matrix records."""
    key = _key(name)
    known = {a.arch: a for a in m.archs}
    try:
        arch = arch_from(name)
    except ValueError:
        arch = None
    if arch is not None and arch in known:
        return GpuClass(name, labels, (arch,))
    gpus = {_key(g): a.arch for a in m.archs for g in (*a.datacenter_gpus, *a.gpus)}
    if key in gpus:
        return GpuClass(name, labels, (gpus[key],))
    family = tuple(a.arch for a in m.archs if _key(a.family) == key and a.datacenter_gpus)
    if family:
        return GpuClass(name, labels, family)
    names = sorted({_key(a.family) for a in m.archs} | {a.name for a in m.archs} | {k for k in gpus if " " not in k})
    raise UsageError(
        f"--gpu-runner {name}: not an architecture (sm_90), a data-center GPU (h100) or a GPU family (hopper) "
        f"matrix.toml records{did_you_mean(key, names)}"
    )


def _key(text: str) -> str:
    return re.sub(r"\s+", "-", text.strip().lower().removeprefix("nvidia ").strip())


def ci_shape(
    m: Matrix,
    runner: tuple[str, ...] = (),
    arm_runner: tuple[str, ...] = (),
    gpu_runners: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> CiShape:
    """The shape from the flags, else publish.toml's [ci] table, else GitHub's hosted runners and the default
    GPU classes; each setting on its own (a flag wins over the table)."""
    classes = gpu_runners or m.ci.gpu_runners
    names = [name for name, _ in classes]
    if len(set(names)) != len(names):
        raise UsageError(f"--gpu-runner: a class is named twice ({', '.join(names)})")
    return CiShape(
        runner=runner or m.ci.runner or HOSTED_RUNNER,
        arm_runner=arm_runner or m.ci.arm_runner or ARM_RUNNER,
        gpu_classes=tuple(gpu_class(m, n, labels) for n, labels in classes) or DEFAULT_GPU_CLASSES,
    )


def driver_floor(m: Matrix, items: list[Item]) -> tuple[int, Driver] | None:
    """The oldest driver every CUDA image of the set runs on: the minor-version-compatibility floor of the newest
    CUDA major among them ([[cuda_major]] mvc_min_driver). None: no CUDA image, or that floor is not recorded."""
    majors = {i.combo.variant.cuda.major for i in items if i.combo.variant.cuda is not None}
    if not majors:
        return None
    newest = max(majors)
    floor = next((c.mvc_min_driver for c in m.cuda_majors if c.major == newest), None)
    return None if floor is None else (newest, floor)
