"""The NVIDIA library wheels a torch variant's pins install (cuDNN, NCCL, the cuda-toolkit meta-package's
components) whose platform tags matrix.toml records ([[nvidia_wheel]]): each sets a glibc floor, as torch's own
wheel does (the rule glibc-os). A pin whose wheel the matrix does not record is left out: nothing is assumed."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from builder.core.kinds import Platform
from builder.matrix.model import Matrix, NvidiaWheel, TorchVariant


@dataclass(frozen=True)
class InstalledWheel:
    """One NVIDIA wheel the variant installs on a platform, and its platform tag."""

    label: str  # nvidia-cudnn-cu13==9.24.0.43, cuda-toolkit==13.0.3 (nvidia-cublas)
    tag: str
    sources: tuple[str, ...]


def pinned(v: TorchVariant) -> tuple[tuple[str, Version], ...]:
    """The (package, version) pairs of the variant's NVIDIA pins the matrix records: cuDNN and NCCL as
    nvidia-<lib>-cu<major>, the CUDA runtime where it is a cuda-toolkit==X.Y.Z pin."""
    if v.cuda is None:
        return ()
    found = [(f"nvidia-cudnn-cu{v.cuda.major}", v.cudnn), (f"nvidia-nccl-cu{v.cuda.major}", v.nccl)]
    found.append(("cuda-toolkit", v.cuda_release))
    return tuple((package, version) for package, version in found if version is not None)


def installed(m: Matrix, v: TorchVariant, platform: Platform) -> tuple[InstalledWheel, ...]:
    """The variant's NVIDIA wheels on this platform whose tag is recorded."""
    found = []
    for package, version in pinned(v):
        entry = _entry(m, package, version)
        tag = entry.tag_for(platform.machine) if entry else None
        if entry is not None and tag is not None:
            via = f" ({entry.via})" if entry.via else ""
            found.append(InstalledWheel(f"{package}=={version}{via}", tag, entry.sources))
    return tuple(found)


def _entry(m: Matrix, package: str, version: Version) -> NvidiaWheel | None:
    return next((w for w in m.nvidia_wheels if w.package == package and version in w.versions), None)
