"""Pick the one combination a render/build should use from partial flags, and say why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from builder.archs import Arch
from builder.errors import NoMatchError
from builder.matrix.model import Matrix
from builder.resolve.combos import Combination
from builder.resolve.query import Query
from builder.resolve.resolver import Lookup, Result, lookup

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


def choose(
    m: Matrix,
    q: Query,
    extra_archs: tuple[Arch, ...] = (),
    problem: Callable[[Combination], str | None] | None = None,
) -> Choice:
    """The best valid combination; with several --arch, one whose torch build runs on every one;
    with `problem`, the best one it finds nothing wrong with (e.g. an nvidia/cuda image exists)."""
    found = lookup(m, q)
    if not found.valid:
        raise NoMatchError(failure_message(found))
    valid = list(found.valid)
    for arch in extra_archs:
        also = lookup(m, replace(q, arch=arch))
        if not also.valid:
            raise NoMatchError(failure_message(also, f"no valid combination for {arch.name}"))
        ids = {r.combo.id for r in also.valid}
        valid = [r for r in valid if r.combo.id in ids]
    if not valid:
        names = ", ".join(a.name for a in (q.arch, *extra_archs) if a is not None)
        raise NoMatchError(f"no single combination runs on all of {names}; build them separately")
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
