"""Indexes and derived facts over the Matrix that the rules ask for (computed once per matrix)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from packaging.version import Version

from builder.core.archs import Arch
from builder.core.versions import Driver, minor_of
from builder.matrix.drivers import unrecorded_driver
from builder.matrix.model import ArchInfo, Companion, CudaImage, CudnnRange, Matrix

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_", re.ASCII)
# PEP 513 / 571 / 599 legacy aliases for the glibc they require.
_LEGACY_MANYLINUX = {"manylinux1": Version("2.5"), "manylinux2010": Version("2.12"), "manylinux2014": Version("2.17")}


@dataclass(frozen=True)
class Facts:
    """Derived facts and indexes over one Matrix, computed on first use."""

    matrix: Matrix

    @cached_property
    def _ga_drivers(self) -> dict[tuple[int, int], Driver]:
        """Per CUDA minor, the lowest sourced toolkit driver: the GA driver, which reports X.Y."""
        floors: dict[tuple[int, int], Driver] = {}
        for release in self.matrix.cuda:
            if release.min_driver is not None:
                current = floors.get(release.minor)
                if current is None or release.min_driver < current:
                    floors[release.minor] = release.min_driver
        return floors

    def full_driver(self, cuda: Version) -> Driver | None:
        return self._ga_drivers.get(minor_of(cuda))

    @cached_property
    def _mvc(self) -> dict[int, Driver | None]:
        return {m.major: m.mvc_min_driver for m in self.matrix.cuda_majors}

    def mvc_floor(self, major: int) -> Driver | None:
        return self._mvc.get(major)

    def reported_cuda(self, driver: Driver) -> tuple[int, int] | None:
        branch = next((b for b in self.matrix.driver_branches if b.branch == driver.branch), None)
        return branch.reports_cuda if branch else None

    def unrecorded_driver(self, driver: Driver) -> str | None:
        """Why the driver rules cannot check this driver (a branch newer than every recorded one); None: they can."""
        return unrecorded_driver(self.matrix, driver)

    @cached_property
    def archs(self) -> dict[Arch, ArchInfo]:
        return {a.arch: a for a in self.matrix.archs}

    def cudnn_range(self, version: Version) -> CudnnRange | None:
        if version not in self._cudnn_cache:
            self._cudnn_cache[version] = next((c for c in self.matrix.cudnn if version in c.versions), None)
        return self._cudnn_cache[version]

    @cached_property
    def _cudnn_cache(self) -> dict[Version, CudnnRange | None]:
        return {}

    def companion_problem(self, comp: Companion, torch: Version, python: str) -> str | None:
        """Why a torchvision/torchaudio release does not go with this torch and Python (None: it does)."""
        key = (comp.name, comp.version, torch, python)
        if key not in self._companion_cache:
            problem = None
            if torch not in comp.requires_torch:
                problem = f"{comp.name} {comp.version} requires torch{comp.requires_torch}"
            elif comp.python is not None and Version(python) not in comp.python:
                problem = f"{comp.name} {comp.version} requires Python{comp.python}"
            self._companion_cache[key] = problem
        return self._companion_cache[key]

    @cached_property
    def _companion_cache(self) -> dict[tuple[str, Version, Version, str], str | None]:
        return {}

    @cached_property
    def companions(self) -> dict[tuple[str, Version], Companion]:
        return {(c.name, c.version): c for c in (*self.matrix.torchvision, *self.matrix.torchaudio)}

    def fc_image(self, cuda: Version) -> CudaImage | None:
        """The newest nvidia/cuda release of this minor that records forward-compat branches."""
        candidates = [i for i in self.matrix.cuda_images if minor_of(i.cuda) == minor_of(cuda) and i.fc_branches]
        return max(candidates, key=lambda i: i.cuda, default=None)

    @staticmethod
    def glibc_floor(platform_tag: str) -> Version | None:
        match = _MANYLINUX.match(platform_tag)
        if match:
            return Version(f"{match[1]}.{match[2]}")
        return _LEGACY_MANYLINUX.get(platform_tag.split("_", 1)[0])
