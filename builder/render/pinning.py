"""Base images pinned to matrix.lock's digests (`--locked`): `FROM image@digest` for the platform built."""

from __future__ import annotations

from dataclasses import replace

from builder.kinds import Platform
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
