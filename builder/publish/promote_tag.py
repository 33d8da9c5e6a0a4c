"""`torchyard promote`'s build tag (issue 44 item 2): DST's `<tag>-<YYYYMMDD>[.N]`, written registry-side from the
promoted manifest after its signatures and attestations and before DST names it, so a failed write leaves DST where
it was and the same command again writes both. A DST that already names the digest gets none (it got one when it
was promoted; a tag promoted by a torchyard without build tags has none)."""

from __future__ import annotations

from builder.oci.client import Distribution, Manifest
from builder.oci.promote import BeforeTag
from builder.oci.refs import ImageRef
from builder.pipeline.registry import Registry
from builder.publish.build_tags import build_tag_of, today


class BuildTagStamp:
    """A promote `before_tag` step: the carried attestations' step first (when given), then the build tag."""

    def __init__(self, client: Distribution, target: ImageRef, then: BeforeTag | None, day: str | None = None) -> None:
        self.registry = Registry(client=client)
        self.target = f"{target.repo}:{target.tag}"
        self.then = then
        self.day = day or today()
        self.written: str | None = None  # the build tag's ref, once written (or found written today)

    def __call__(self, manifest: Manifest, images: list[Manifest]) -> None:
        if self.then is not None:
            self.then(manifest, images)
        named = self.registry.read(self.target)
        if named is not None and named.digest == manifest.digest:
            return
        self.written = build_tag_of(self.registry, self.target, manifest, self.day)
