"""Combinations: one torch wheel variant with one Python on one OS base for one platform, and their enumeration."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from builder.core.archs import Arch
from builder.core.kinds import Platform
from builder.core.versions import minor_str
from builder.matrix.model import Build, Matrix, OSBase, TorchRelease, TorchVariant, Wheels
from builder.resolve import lifecycle
from builder.resolve.lifecycle import OsPhase
from builder.resolve.query import Query
from builder.smoke.manifest import STACK_KEYS


@dataclass(frozen=True)
class Combination:
    """One torch wheel variant with one Python on one OS base, for one platform."""

    torch: TorchRelease
    variant: TorchVariant
    python: str
    os: OSBase
    platform: Platform = Platform.AMD64

    @property
    def id(self) -> str:
        suffix = "" if self.platform is Platform.AMD64 else f"-{self.platform.arch}"
        return f"torch{self.torch.version}-{self.variant.name}-py{self.python}-{self.os.name}{suffix}"

    @property
    def wheels(self) -> Wheels | None:
        """The release's wheels for this platform (None: torch publishes none there)."""
        return self.torch.on(self.platform)

    @property
    def build(self) -> Build | None:
        """This variant's build for this platform (None: no wheels of this variant there)."""
        return self.variant.build(self.platform)

    @property
    def sass(self) -> tuple[Arch, ...] | None:
        return self.build.sass if self.build else None

    @property
    def ptx(self) -> tuple[Arch, ...]:
        return self.build.ptx if self.build else ()

    @property
    def is_pypi_default(self) -> bool:
        return self.wheels is not None and self.variant.name == self.wheels.pypi_default

    @property
    def local_version(self) -> str:
        """torch.__version__ as the wheel reports it: 2.5.1+cu124 (some builds report no local part)."""
        local = self.build.local if self.build else self.variant.name
        return f"{self.torch.version}+{local}" if local else str(self.torch.version)

    def stack(self) -> dict[str, str | None]:
        """The stack components (builder/smoke/manifest.py: STACK) as the image's manifest declares them."""
        v = self.variant
        found = {
            "torch": self.local_version,
            "torchvision": str(self.torch.torchvision),
            "torchaudio": str(self.torch.torchaudio),
            "cuda": minor_str(v.cuda) if v.cuda else None,
            "cudnn": str(v.cudnn) if v.cudnn else None,
            "nccl": str(v.nccl) if v.nccl else None,
            "python": self.python,
            "os": self.os.name,
        }
        assert tuple(found) == STACK_KEYS, "Combination.stack() and manifest.STACK list the same components"
        return found


def selected(q: Query, release: TorchRelease, variant: TorchVariant) -> bool:
    """The query's plain filters (--torch, --cuda, --variant); compatibility is the rules' job."""
    if q.torch is not None and release.version not in q.torch:
        return False
    if q.variant is not None and variant.name != q.variant:
        return False
    if variant.cuda is None and q.variant is None and (q.archs or q.driver is not None):
        return False  # naming a GPU or driver asks for a GPU build; the cpu wheel only by --variant cpu
    if q.cuda is not None:
        return variant.cuda is not None and variant.cuda in q.cuda
    return True


def enumerate_combinations(m: Matrix, q: Query) -> Iterator[Combination]:
    """Every combination the filters admit, in matrix order, for the query's platform. Python candidates are
    what the OS offers; with --python, also the torch wheel tags, so a missing interpreter shows up as a reason.
    An OS past the end of its long-term support is left out unless --os names it (builder/resolve/lifecycle.py)."""
    day = lifecycle.today()  # an OS past its long-term support only when asked for by name
    oses = [o for o in m.os if o.name == q.os or (q.os is None and lifecycle.os_phase(o, day) is not OsPhase.ENDED)]
    for release in m.torch:
        wheels = release.on(q.platform)
        tags = wheels.python if wheels else release.python
        for variant in release.variants:
            if not selected(q, release, variant):
                continue
            for base in oses:
                offered = (*tags, *base.pythons()) if q.python is not None else base.pythons()
                for python in dict.fromkeys(offered):
                    if q.python is None or python in q.python:
                        yield Combination(release, variant, python, base, q.platform)
