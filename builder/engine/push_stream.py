"""What the engine's push stream says of each layer: sent to the registry, or already there.

Seen on Docker 26.1 with the containerd image store (docs/benchmarks.md, "pushed_bytes of a docker push"): one
event per layer, its `id` the first 12 hex digits of the layer's (compressed) digest, its status "Pushed" when the
engine uploaded it, "Layer already exists" / "Already exists" when the registry had it in this repository, and
"Mounted from OTHER" when the registry copied it from another repository (nothing sent). "Pushing" progress, with
a size, comes only for layers large or slow enough to report progress, so sizes are read from the pushed manifest
instead (builder/pipeline/push_count.py). The image config blob gets no event at all. With the graph driver's
store the `id` is the layer's uncompressed diff id, which names no blob of the manifest: nothing matches, and the
count is not recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from builder.engine.types import RegistryAuth

SENT, KEPT = "sent", "kept"
_KEPT_WORDS = ("Layer already exists", "Already exists")
_MOUNTED = "Mounted from "


@dataclass(frozen=True)
class PushedLayers:
    """The short ids (12 hex digits) the push said it sent, and those it said the registry already had."""

    sent: frozenset[str] = frozenset()
    kept: frozenset[str] = frozenset()


def verdict(status: str) -> str | None:
    """SENT, KEPT, or None for a status that settles nothing (Preparing, Waiting, Pushing progress)."""
    if status == "Pushed":
        return SENT
    if status in _KEPT_WORDS or status.startswith(_MOUNTED):
        return KEPT
    return None


class LayerTally:
    """Fed every event of one push; the last settling status of each layer id wins."""

    def __init__(self) -> None:
        self._said: dict[str, str] = {}

    def feed(self, event: dict[str, Any]) -> None:
        short, said = event.get("id"), verdict(str(event.get("status") or ""))
        if isinstance(short, str) and short and said is not None:
            self._said[short] = said

    def layers(self) -> PushedLayers:
        return PushedLayers(
            frozenset(k for k, v in self._said.items() if v == SENT),
            frozenset(k for k, v in self._said.items() if v == KEPT),
        )


# the real engine's Images.push_said (builder/engine/images.py): the push, its digest, and what its stream said of
# each layer. An engine without it (a test's fake) pushes with Engine.push, and its bytes are not recorded.
PushSaid = Callable[[str, RegistryAuth | None, Callable[[str], None]], tuple[str, PushedLayers]]
