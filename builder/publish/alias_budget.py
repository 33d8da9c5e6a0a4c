"""The size budget at an alias's move: an alias whose new image grew past the budget over the image it names now is
held, and the run fails (builder/publish/budget.py measures the growth)."""

from __future__ import annotations

from collections.abc import Callable

from builder.core.kinds import AliasStatus
from builder.oci.client import Manifest
from builder.publish.budget import growth, over_budget
from builder.publish.report import AliasResult

Log = Callable[[str], None]


def grown(
    was: Manifest | None, will: Manifest, alias_ref: str, immutable: str, budget: float | None, log: Log
) -> AliasResult | None:
    """The alias held when its new image grew past the budget over the one it names now; None: it may move."""
    if was is None:
        return None  # nothing to compare with
    found = growth(was, will)
    if found is None:
        log(f"SIZE  {alias_ref}: not checked (not a single image)")
        return None
    log(f"SIZE  {alias_ref}: {found.describe()}")
    if budget is None or not over_budget(found, budget):
        return None
    reason = f"its image grew past the {budget:g} % size budget: {found.describe()} (--allow-growth accepts it)"
    log(f"HOLD  {alias_ref}: {reason}")
    return AliasResult(alias_ref.rsplit(":", 1)[1], AliasStatus.HELD, immutable, reason, over_budget=True)
