"""Pick the one combination a render/build should use from partial flags, and say why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from builder.core.errors import NoMatchError
from builder.matrix.model import Matrix
from builder.resolve.combos import Combination
from builder.resolve.query import Query
from builder.resolve.resolver import Lookup, Result, first_valid, lookup

SHOWN_REASONS = 8


@dataclass(frozen=True)
class Choice:
    result: Result
    valid_count: int

    def describe(self) -> str:
        return f"chose {self.result.combo.id} (the best of {self.valid_count} valid combinations)"


def failure_message(found: Lookup, prefix: str = "no valid combination") -> str:
    """Lookup's grouped reasons, the message of a NoMatchError."""
    reasons = found.reasons()
    lines = [f"{prefix} ({len(found.rejected)} ruled out)"]
    for reason, count in reasons[:SHOWN_REASONS]:
        lines.append(f"  {reason}" + (f"  ({count} combinations)" if count else ""))
    if len(reasons) > SHOWN_REASONS:
        lines.append(f"  ... and {len(reasons) - SHOWN_REASONS} more reasons")
    return "\n".join(lines)


def choose_result(m: Matrix, q: Query) -> Result | None:
    """Lookup's first row (its ranking: known-good first, then newest torch, ...), or None when nothing is
    valid: the one ranking every surface that names one combination uses."""
    return first_valid(m, q)


def choose(m: Matrix, q: Query, problem: Callable[[Combination], str | None] | None = None) -> Choice:
    """The best valid combination (with several architectures, one whose torch build runs on every one);
    with `problem`, the best one it finds nothing wrong with (e.g. an nvidia/cuda image exists)."""
    found = lookup(m, q)
    if not found.valid:
        prefix = "no valid combination"
        if len(q.archs) > 1:
            prefix += f" runs on all of {', '.join(a.name for a in q.archs)}"
        raise NoMatchError(failure_message(found, prefix))
    valid = list(found.valid)
    if problem is not None:
        problems = {r.combo.id: problem(r.combo) for r in valid}
        usable = [r for r in valid if problems[r.combo.id] is None]
        if not usable:
            first = problems[valid[0].combo.id]
            raise NoMatchError(
                f"none of the {len(valid)} valid combinations can be built this way; the best, "
                f"{valid[0].combo.id}: {first}"
            )
        valid = usable
    return Choice(valid[0], len(valid))
