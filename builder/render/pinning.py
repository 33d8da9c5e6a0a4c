"""Base images pinned to matrix.lock's digests (`--locked`): `FROM image@digest` for the platform built; and
Docker Hub base images asked at a mirror (`--registry-mirror`)."""

from __future__ import annotations

from dataclasses import replace

from builder.core.kinds import Platform
from builder.matrix.lock import BaseLock, pin
from builder.render.context import Bases


def pinned(bases: Bases, lock: BaseLock | None, platform: Platform) -> Bases:
    """The same bases, each `image@digest` from the lock (unchanged without one: the tags stay)."""
    if lock is None:
        return bases
    pins = lock.pins(platform.value)
    return replace(
        bases, os_image=pin(bases.os_image, pins) or bases.os_image, toolchain_image=pin(bases.toolchain_image, pins)
    )


def mirrored(bases: Bases, mirror: str | None) -> Bases:
    """Docker Hub's images from a mirror: debian:bookworm-slim -> MIRROR/library/debian:bookworm-slim (a
    pull-through cache, a corporate registry, or this project's local registry with its multi-platform base);
    images of other registries stay as they are. A lock's digests stay: a mirror serves the same manifests."""
    if mirror is None:
        return bases
    return replace(
        bases,
        os_image=_mirror(bases.os_image, mirror) or bases.os_image,
        toolchain_image=_mirror(bases.toolchain_image, mirror),
    )


_HUB_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io")


def _mirror(ref: str | None, mirror: str) -> str | None:
    """debian:bookworm-slim -> MIRROR/library/debian:bookworm-slim, nvidia/cuda:X -> MIRROR/nvidia/cuda:X;
    a reference naming another registry (a first part with '.', ':' or localhost) stays as it is."""
    if ref is None:
        return None
    name, at, digest = ref.partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        if first not in _HUB_HOSTS:
            return ref
        name = rest
    path, colon, tag = name.partition(":")
    if "/" not in path:
        path = f"library/{path}"
    return f"{mirror}/{path}{colon}{tag}{at}{digest}"
