"""The exported lock: what an image (or a combination) holds, each distribution with the file it came from."""

from __future__ import annotations

from dataclasses import dataclass

from builder.pipeline.image_set import Installed

__all__ = ["Artifact", "Installed", "Left", "Lock", "Locked"]


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """A file on an index: the wheel (or sdist) a distribution was installed from."""

    filename: str
    url: str
    size: int | None
    sha256: str
    upload_time: str | None  # PEP 700, as the index wrote it (2025-01-02T03:04:05.678901Z)


@dataclass(frozen=True, kw_only=True)
class Locked:
    name: str
    version: str
    index: str  # the index (simple API root) the artifact was found on
    artifact: Artifact

    @property
    def is_wheel(self) -> bool:
        return self.artifact.filename.endswith(".whl")


@dataclass(frozen=True, kw_only=True)
class Left:
    """A distribution the lock cannot name a file for, and why (a local wheel, an index that lacks it)."""

    name: str
    version: str
    why: str


@dataclass(frozen=True, kw_only=True)
class Lock:
    source: str  # the image (reference and id) or the combination the set is of
    python: str  # 3.11.2
    machine: str  # x86_64 | aarch64
    packages: tuple[Locked, ...]  # sorted by name
    left_out: tuple[Left, ...] = ()
