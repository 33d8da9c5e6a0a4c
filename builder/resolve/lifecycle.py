"""Lifecycles: where an OS base and a driver branch stand on a given day, as matrix.toml records them.

An OS has regular security support (Debian's security team, Ubuntu's standard support), then long-term support
(Debian LTS, Ubuntu Pro's ESM), then none. A driver branch is supported through the month NVIDIA names as its end
of life (`ends`), or, where NVIDIA gave none that was recorded, until the month by which its list of supported
branches no longer names it (`ended_by`). What the matrix does not record is not recorded: no phase is guessed.
The chooser ranks an OS past regular support below one inside it and leaves out one past long-term support unless
it is asked for by name (builder/resolve/resolver.py); doctor, lookup and the page say when the machine's branch
or an image's OS is past its end, and name the branch to move to.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from enum import IntEnum

from builder.core import env
from builder.core.archs import Arch
from builder.matrix.model import DriverBranch, Matrix, OSBase

Month = tuple[int, int]


class OsPhase(IntEnum):
    """How far into its life an OS is; the order is the chooser's (regular support first)."""

    REGULAR = 0
    LONG_TERM = 1  # past regular security support, inside long-term support
    NOT_RECORDED = 2
    ENDED = 3  # past long-term support: chosen only when asked for by name


def today() -> datetime.date:
    """$TORCHYARD_TODAY (YYYY-MM-DD: the day to judge lifecycles on, for reproducible answers), else the clock."""
    given = os.environ.get(env.TODAY, "")
    try:
        return datetime.date.fromisoformat(given) if given else datetime.date.today()
    except ValueError:
        return datetime.date.today()


def month_of(day: datetime.date) -> Month:
    return day.year, day.month


def words(month: Month) -> str:
    return datetime.date(month[0], month[1], 1).strftime("%B %Y")


def os_phase(o: OSBase, day: datetime.date) -> OsPhase:
    """Supported through the month each end names: past it from the first day of the next month."""
    now = month_of(day)
    if o.lts_end is not None and now > o.lts_end:
        return OsPhase.ENDED
    if o.regular_end is None:
        return OsPhase.NOT_RECORDED
    return OsPhase.REGULAR if now <= o.regular_end else OsPhase.LONG_TERM


def os_note(o: OSBase, day: datetime.date) -> str | None:
    """One line when the OS is past its regular support (None inside it, or when not recorded)."""
    phase = os_phase(o, day)
    if phase is OsPhase.LONG_TERM and o.regular_end and o.lts_end:
        return (f"{o.name} is past its regular security support (ended {words(o.regular_end)}): long-term support "
                f"only, until {words(o.lts_end)}")  # fmt: skip
    if phase is OsPhase.ENDED and o.lts_end:
        return f"{o.name} is past the end of its long-term support ({words(o.lts_end)}): no security updates"
    return None


def branch_of(m: Matrix, branch: int) -> DriverBranch | None:
    return next((b for b in m.driver_branches if b.branch == branch), None)


def branch_ended(b: DriverBranch, day: datetime.date) -> bool:
    now = month_of(day)
    return (b.ends is not None and now > b.ends) or (b.ended_by is not None and now >= b.ended_by)


def branch_note(b: DriverBranch, day: datetime.date) -> str | None:
    """One line when NVIDIA no longer supports the branch (None while it does, or when not recorded)."""
    if not branch_ended(b, day):
        return None
    kind = f" ({b.kind} branch)" if b.kind else ""
    if b.ends is not None and month_of(day) > b.ends:
        return f"driver branch R{b.branch}{kind} reached its end of life in {words(b.ends)}"
    assert b.ended_by is not None
    return (f"driver branch R{b.branch}{kind} is no longer supported by NVIDIA: its list of supported data center "
            f"branches of {words(b.ended_by)} does not name it")  # fmt: skip


def move_to(m: Matrix, archs: Iterable[Arch], day: datetime.date) -> DriverBranch | None:
    """The newest long-term branch NVIDIA still supports that runs every GPU given (not past the last branch of
    a legacy architecture)."""
    infos = {a.arch: a for a in m.archs}
    lasts = [info.driver_last_branch for a in archs if (info := infos.get(a.base)) and info.driver_last_branch]
    fits = [
        b
        for b in m.driver_branches
        if b.kind == "long-term"
        and b.ends is not None
        and not branch_ended(b, day)
        and all(b.branch <= n for n in lasts)
    ]
    return max(fits, key=lambda b: b.branch, default=None)


def move_line(b: DriverBranch) -> str:
    assert b.ends is not None
    return f"install a driver of branch R{b.branch} (long-term support, until {words(b.ends)})"
