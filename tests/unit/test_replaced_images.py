"""Issue 42 item 7: a rebuild under the same tag leaves no `<none>` image behind (builder/pipeline/replaced.py):
the image the tag left is removed when it is torchyard's and no tag is left on it; one still tagged, one that is
not torchyard's, and one the engine refuses to remove (a container uses it) stay. Fake engine at its seam."""

from __future__ import annotations

from fake_engine import FakeEngine

from builder.core.errors import EngineError
from builder.engine.types import ImageInfo
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.replaced import drop_replaced, tagged_before

OLD, NEW, OTHER = "sha256:" + "1" * 64, "sha256:" + "2" * 64, "sha256:" + "3" * 64


def _engine(*images: tuple[str, dict[str, str]]) -> FakeEngine:
    engine = FakeEngine(contents={})
    for image_id, labels in images:
        engine.images[image_id] = ImageInfo(id=image_id, labels=labels, tags=(), digests=(), size=1)
    return engine


def test_the_image_a_rebuild_s_tag_left_is_removed_when_no_tag_is_left_on_it() -> None:
    engine = _engine((OLD, {CONTENT_LABEL: "a"}), (NEW, {CONTENT_LABEL: "b"}))
    engine.tags["r/x:1"] = OLD
    previous = tagged_before(engine, ["r/x:1", "r/x:alias"], NEW)
    assert previous == {OLD}
    engine.tag(NEW, "r/x:1")
    lines: list[str] = []
    assert drop_replaced(engine, previous, lines.append, "[runtime] ") == [OLD]
    assert OLD not in engine.images and engine.tags == {"r/x:1": NEW}
    assert lines == [f"[runtime] removed the image the tag left, {OLD[:19]} (no tag was left on it)"]


def test_an_image_still_tagged_or_not_torchyard_s_stays() -> None:
    engine = _engine((OLD, {CONTENT_LABEL: "a"}), (OTHER, {"maintainer": "someone"}), (NEW, {CONTENT_LABEL: "b"}))
    engine.tags |= {"r/x:1": OLD, "mine:keep": OLD, "r/x:2": OTHER}
    previous = tagged_before(engine, ["r/x:1", "r/x:2"], NEW)
    engine.tag(NEW, "r/x:1")
    engine.tag(NEW, "r/x:2")
    assert drop_replaced(engine, previous, lambda line: None) == []
    assert OLD in engine.images and OTHER in engine.images  # the user's own tag; not torchyard's image
    assert tagged_before(engine, ["r/x:1"], NEW) == set()  # the new image itself is never "previous"


def test_an_image_the_engine_will_not_remove_is_kept_with_its_reason() -> None:
    engine = _engine((OLD, {CONTENT_LABEL: "a"}), (NEW, {CONTENT_LABEL: "b"}))
    engine.tags["r/x:1"] = OLD
    previous = tagged_before(engine, ["r/x:1"], NEW)
    engine.tag(NEW, "r/x:1")

    def refuse(ref: str) -> None:
        raise EngineError(f"remove {ref}: conflict: image is being used by running container abc")

    engine.untag = refuse  # type: ignore[method-assign]
    lines: list[str] = []
    assert drop_replaced(engine, previous, lines.append) == []
    assert OLD in engine.images and "kept the image the tag left" in lines[0] and "running container" in lines[0]
