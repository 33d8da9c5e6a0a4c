"""What every rule returns, and the enums that say how a driver and a GPU would run a build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.resolve.combos import Combination
    from builder.resolve.facts import Facts
    from builder.resolve.query import Query


@dataclass(frozen=True)
class Check:
    """One rule's verdict on one combination, with its reason and source ids."""

    rule: str
    ok: bool
    reason: str
    sources: tuple[str, ...] = ()


class DriverMode(StrEnum):
    FULL = "full"
    MINOR_VERSION = "minor-version"
    FORWARD_COMPAT = "forward-compat"

    @property
    def words(self) -> str:
        """As a user would say it."""
        return _MODE_WORDS[self]


_MODE_WORDS = {
    DriverMode.FULL: "runs at full level",
    DriverMode.MINOR_VERSION: "older driver, compatible",
    DriverMode.FORWARD_COMPAT: "needs cuda-compat",
}


class ArchSupport(StrEnum):
    NATIVE = "native"
    COMPATIBLE = "compatible"
    PTX = "ptx"
    NONE = "none"

    @property
    def words(self) -> str:
        return _ARCH_WORDS[self]


_ARCH_WORDS = {
    ArchSupport.NATIVE: "built for it",
    ArchSupport.COMPATIBLE: "runs older-minor code",
    ArchSupport.PTX: "JIT from PTX (slow first run)",
    ArchSupport.NONE: "no code",
}

Rule = Callable[["Facts", "Query", "Combination"], Check]
