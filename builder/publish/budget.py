"""The size budget (issue 42 item 3): an alias moves to a new image only when that image's compressed size (the sum
of its manifest's layers) has not grown past the budget over the image the alias named before. Past it, the alias
is held and the run fails (exit 4), naming the layers that are new and their sizes; `--allow-growth` accepts it.
Both sizes are read from the registry (manifests only, no blob is pulled). An alias that named nothing before, or
an index, is not checked (said in the log)."""

from __future__ import annotations

from dataclasses import dataclass

from builder.oci.client import Manifest
from builder.pipeline.registry import layer_sizes

DEFAULT_BUDGET = 5.0  # percent


@dataclass(frozen=True)
class Growth:
    before: int  # compressed bytes of the image the alias named
    after: int  # of the image it would name
    new_layers: tuple[tuple[str, int], ...]  # layers the old image lacks, biggest first

    @property
    def percent(self) -> float:
        return 100.0 * (self.after - self.before) / self.before if self.before else 0.0

    def describe(self) -> str:
        layers = ", ".join(f"{digest[:19]} {_mb(size)}" for digest, size in self.new_layers[:3]) or "none"
        return f"{_mb(self.before)} -> {_mb(self.after)} ({self.percent:+.1f} %); new layers: {layers}"


def growth(was: Manifest | None, will: Manifest) -> Growth | None:
    """How the image of manifest `will` compares with the one of `was`; None when either is no single image."""
    before, after = layer_sizes(was), layer_sizes(will)
    if not before or not after:
        return None
    new = sorted(((d, s) for d, s in after.items() if d not in before), key=lambda pair: -pair[1])
    return Growth(sum(before.values()), sum(after.values()), tuple(new))


def over_budget(found: Growth, budget: float) -> bool:
    return found.after > found.before * (1 + budget / 100)


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
