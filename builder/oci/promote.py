"""Promote an image from one repository to another registry-side: blobs by cross-repository mount
(same registry) or copied between registries, then the manifest (or the index and each of its
manifests) PUT byte for byte, so the digest stays the same. Nothing goes through a Docker engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from builder.core.errors import PushError
from builder.oci.client import Distribution, Manifest
from builder.oci.refs import ImageRef, RepoRef, platform_of

CONTENT_LABEL = "io.torchyard.content-hash"

# Called with the promoted manifest and its platform images once they are in the target repository by digest,
# before the tag is written: what must be true of an image before its tag names it (its attestations, its
# signatures) is done there, and a failure there leaves the tag where it was.
BeforeTag = Callable[[Manifest, list[Manifest]], None]


@dataclass
class Promotion:
    source: str
    target: str
    digest: str = ""
    unchanged: bool = False  # the target tag already named this digest
    mounted: int = 0
    copied: int = 0
    present: int = 0
    bytes_copied: int = 0
    platforms: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        if self.unchanged:
            return f"{self.target} already is {self.digest}: nothing to do"
        return (
            f"promoted {self.source} -> {self.target} ({self.digest}): {self.mounted} blobs mounted, "
            f"{self.present} already there, {self.copied} copied ({self.bytes_copied} bytes)"
        )


def promote(
    client: Distribution,
    source: ImageRef,
    target: ImageRef,
    content_hash: str | None = None,
    before_tag: BeforeTag | None = None,
) -> Promotion:
    """Copy `source` to `target` (a tag) in the registry. With `content_hash`, every platform image of the
    source must carry exactly that io.torchyard.content-hash label, or nothing is promoted. `before_tag` runs
    before the tag moves, also when the tag already names the digest (a rerun finishes what a failed run left)."""
    result = Promotion(str(source), str(target))
    manifest = client.manifest(source.repo, source.reference)
    if manifest is None:
        raise PushError(f"{source} does not exist: nothing to promote")
    children = _children(client, source.repo, manifest)
    result.platforms = sorted(platform for platform, _, _ in children)
    if content_hash is not None:
        _check_content(source, content_hash, children)
    result.digest = manifest.digest
    existing = client.manifest(target.repo, target.reference)
    images = [child for _, child, _ in children]
    if existing is not None and existing.digest == manifest.digest:
        result.unchanged = True
        if before_tag is not None:
            before_tag(manifest, images)
        return result
    for child in images:
        copy_blobs(client, source.repo, target.repo, child, result)
        if child is not manifest:
            client.put_manifest(target.repo, child.digest, child.raw, child.media_type)
    if before_tag is not None:
        client.put_manifest(target.repo, manifest.digest, manifest.raw, manifest.media_type)
        before_tag(manifest, images)
    client.put_manifest(target.repo, target.reference, manifest.raw, manifest.media_type)
    return result


def _children(client: Distribution, repo: RepoRef, manifest: Manifest) -> list[tuple[str, Manifest, dict[str, Any]]]:
    """(platform, image manifest, config) for every platform image of a manifest or an index."""
    manifests = [manifest]
    if manifest.is_index:
        manifests = []
        for entry in manifest.data.get("manifests") or []:
            child = client.manifest(repo, str(entry["digest"]))
            if child is None:
                raise PushError(f"{repo}@{entry['digest']} is listed in the index but missing")
            manifests.append(child)
    found = []
    for child in manifests:
        config_digest = (child.data.get("config") or {}).get("digest")
        config = client.blob_json(repo, str(config_digest)) if config_digest else {}
        found.append((platform_of(config) if config else "unknown/unknown", child, config))
    return found


def _check_content(source: ImageRef, expected: str, children: list[tuple[str, Manifest, dict[str, Any]]]) -> None:
    for platform, _, config in children:
        if platform == "unknown/unknown":
            continue  # attestations carry no labels
        found = ((config.get("config") or {}).get("Labels") or {}).get(CONTENT_LABEL)
        if found != expected:
            raise PushError(
                f"{source} ({platform}) carries content hash {found or 'none'}, not {expected}: "
                "it is not the image that was verified; nothing promoted"
            )


def copy_blobs(client: Distribution, source: RepoRef, target: RepoRef, manifest: Manifest, result: Promotion) -> None:
    """Every blob of `manifest` into `target`: mounted from `source` on the same registry, else copied."""

    def one(descriptor: dict[str, Any]) -> tuple[str, int]:
        digest = str(descriptor["digest"])
        if client.blob_exists(target, digest, push=True):
            return "present", 0
        location = None
        if source.host == target.host:
            location = client.mount(source, target, digest)
            if location is None:
                return "mounted", 0
        return "copied", client.copy_blob(source, target, descriptor, location)

    for outcome, moved in client.http.map(one, manifest.blobs()):
        setattr(result, outcome, getattr(result, outcome) + 1)
        result.bytes_copied += moved
