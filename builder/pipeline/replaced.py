"""The image a new build's tag was taken from: removed when that left it with no tag at all (issue 42 item 7).

A rebuild under the same tag (a refresh, a changed input, a template change) moves the tag to the new image; the
old one stays in the engine as `<none>` (`docker images` lists one more after every such build, and its layers
stay on disk). torchyard removes it only when it is torchyard's own (its content-hash label), has no tag left
(neither another torchyard tag nor the user's own), and no container uses it (not forced: the engine refuses,
and it is kept with that reason)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from builder.core.errors import EngineError
from builder.engine import Engine
from builder.pipeline.plan import CONTENT_LABEL


def tagged_before(engine: Engine, refs: Iterable[str], new_id: str) -> set[str]:
    """The images (ids) these refs name now, other than the one about to take them."""
    found = (engine.inspect(ref) for ref in refs)
    return {info.id for info in found if info is not None and info.id != new_id}


def drop_replaced(engine: Engine, previous: Iterable[str], log: Callable[[str], None], prefix: str = "") -> list[str]:
    """Remove each previous image that is torchyard's and now has no tag; the ids removed. `prefix`: each log line's
    (the flavor)."""
    removed = []
    for image_id in sorted(previous):
        info = engine.inspect(image_id)
        if info is None or info.tags or CONTENT_LABEL not in info.labels:
            continue
        try:
            engine.untag(image_id)
        except EngineError as exc:
            log(f"{prefix}kept the image the tag left, {image_id[:19]}: {exc}")
            continue
        removed.append(image_id)
        log(f"{prefix}removed the image the tag left, {image_id[:19]} (no tag was left on it)")
    return removed
