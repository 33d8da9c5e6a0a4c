"""Closed vocabularies and the options of a render (what besides the combination shapes the image)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, TypeVar

from builder.archs import Arch
from builder.errors import UsageError
from builder.matrix.reader import did_you_mean
from builder.render.network import Network


class Flavor(StrEnum):
    RUNTIME = "runtime"
    DEVEL = "devel"


class Strategy(StrEnum):
    WHEELS = "wheels"
    CUDA_BASE = "cuda-base"


E = TypeVar("E", bound=StrEnum)


def parse_choice(kind: type[E], value: str, flag: str) -> E:
    names = [e.value for e in kind]
    if value not in names:
        raise UsageError(f"{flag}: {value!r} is not one of {', '.join(names)}{did_you_mean(value, names)}")
    return kind(value)


@dataclass(frozen=True, kw_only=True)
class Extension:
    """A CUDA extension to build in the devel toolchain: a local directory or a pip requirement."""

    name: str
    kind: Literal["path", "pip"]
    spec: str  # the host directory (path) or the requirement (pip)


@dataclass(frozen=True, kw_only=True)
class RenderOptions:
    strategy: Strategy = Strategy.WHEELS
    archs: tuple[Arch, ...] = ()  # empty: the torch build's own SASS list
    extra_pip: tuple[str, ...] = ()
    requirements: str | None = None  # content of a requirements file
    user: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    torch_index_url: str | None = None
    extensions: tuple[Extension, ...] = ()
    network: Network = field(default_factory=Network)
    refresh: str = ""  # a token (e.g. 2026-W48): a new one re-runs the OS package steps
