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


class Status(StrEnum):
    """A rule's three outcomes: it held, it failed, or it could not be evaluated (an input or a fact missing); and,
    on a machine without a GPU, a GPU rule that asks nothing there (not applicable: the image runs on the CPU)."""

    PASS = "pass"
    FAIL = "fail"
    NOT_CHECKED = "not-checked"
    NOT_APPLICABLE = "not-applicable"


class Missing(StrEnum):
    """Why a rule was not checked: the question left an input open (a condition on the answer), or the matrix
    does not record a fact the rule needs (nobody can tell until it is recorded)."""

    INPUT = "input"
    FACT = "fact"
    NO_GPU = "no-gpu"  # the machine has no GPU: a driver or GPU rule does not apply (Status.NOT_APPLICABLE)


@dataclass(frozen=True)
class Check:
    """One rule's verdict on one combination, with its reason and source ids.

    `ok` is False only when the rule failed: a rule that was not checked (`missing` set) did not fail, which is
    why lookup keeps such a combination, but it did not pass either (`status`, `passed`). `condition` is what the
    missing input must satisfy for the rule to hold ("driver >= 525.60.13"), where the rule can say it."""

    rule: str
    ok: bool
    reason: str
    sources: tuple[str, ...] = ()
    missing: Missing | None = None
    condition: str | None = None

    @property
    def status(self) -> Status:
        if not self.ok:
            return Status.FAIL
        if self.missing is Missing.NO_GPU:
            return Status.NOT_APPLICABLE
        return Status.PASS if self.missing is None else Status.NOT_CHECKED

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS


def not_checked(
    rule: str, reason: str, sources: tuple[str, ...], missing: Missing, condition: str | None = None
) -> Check:
    """A rule that could not be evaluated: `reason` says what was missing ("no driver given")."""
    return Check(rule, True, reason, sources, missing, condition)


def not_applicable(check: Check) -> Check:
    """A GPU rule on a machine without a GPU: nothing to check (what it would have asked stays in the reason)."""
    return Check(check.rule, True, "no GPU on this machine: the image runs on its CPU", check.sources, Missing.NO_GPU)


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
