"""Combinations: one torch wheel variant with one Python on one OS base, and their enumeration."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from builder.matrix.model import Matrix, OSBase, TorchRelease, TorchVariant
from builder.resolve.query import Query


@dataclass(frozen=True)
class Combination:
    """One torch wheel variant with one Python on one OS base."""

    torch: TorchRelease
    variant: TorchVariant
    python: str
    os: OSBase

    @property
    def id(self) -> str:
        return f"torch{self.torch.version}-{self.variant.name}-py{self.python}-{self.os.name}"

    @property
    def is_pypi_default(self) -> bool:
        return self.variant.name == self.torch.pypi_default

    @property
    def local_version(self) -> str:
        """torch.__version__ as the wheel reports it: 2.5.1+cu124."""
        return f"{self.torch.version}+{self.variant.name}"


def selected(q: Query, release: TorchRelease, variant: TorchVariant) -> bool:
    """The query's plain filters (--torch, --cuda, --variant); compatibility is the rules' job."""
    if q.torch is not None and release.version not in q.torch:
        return False
    if q.variant is not None and variant.name != q.variant:
        return False
    if variant.cuda is None and q.variant is None and (q.arch is not None or q.driver is not None):
        return False  # naming a GPU or driver asks for a GPU build; the cpu wheel only by --variant cpu
    if q.cuda is not None:
        return variant.cuda is not None and variant.cuda in q.cuda
    return True


def enumerate_combinations(m: Matrix, q: Query) -> Iterator[Combination]:
    """Every combination the filters admit, in matrix order. Python candidates are what the OS offers;
    with --python, also the torch wheel tags, so a missing interpreter shows up as a reason."""
    oses = [o for o in m.os if q.os is None or o.name == q.os]
    for release in m.torch:
        for variant in release.variants:
            if not selected(q, release, variant):
                continue
            for base in oses:
                offered = (*release.python, *base.pythons()) if q.python is not None else base.pythons()
                for python in dict.fromkeys(offered):
                    if q.python is None or python in q.python:
                        yield Combination(release, variant, python, base)
