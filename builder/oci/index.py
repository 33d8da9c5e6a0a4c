"""Write an OCI image index (a multi-platform tag) from per-platform manifests already in a repository.

The index is built deterministically (entries sorted by platform, compact JSON), so writing the same
set twice gives the same digest and an unchanged index is not written again. Each entry is checked
against the registry first: it must exist, be an image manifest (not an index), and its config must
say the platform the entry claims.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from builder.core.errors import PushError, UsageError
from builder.oci.client import OCI_INDEX, Distribution, digest_of
from builder.oci.refs import RepoRef, normalize_platform, platform_fields, platform_of


@dataclass(frozen=True)
class IndexEntry:
    digest: str
    platform: str  # linux/amd64, linux/arm64


@dataclass(frozen=True)
class WrittenIndex:
    digest: str
    changed: bool  # False: the tag already named exactly this index


def write_index(
    client: Distribution,
    repo: RepoRef,
    tag: str,
    entries: Sequence[IndexEntry],
    *,
    annotations: dict[str, str] | None = None,
) -> WrittenIndex:
    """PUT an OCI image index under `tag` listing each (digest, platform); returns its digest."""
    platforms = ["/".join(platform_fields(e.platform).values()) for e in entries]
    if not entries:
        raise UsageError("an image index needs at least one platform manifest")
    if len(set(platforms)) != len(platforms):
        raise UsageError(f"an image index lists each platform once: {', '.join(sorted(platforms))}")
    descriptors = [_descriptor(client, repo, entry) for entry in entries]
    raw = index_bytes(descriptors, annotations)
    existing = client.manifest(repo, tag)
    if existing is not None and existing.digest == digest_of(raw):
        return WrittenIndex(existing.digest, changed=False)
    return WrittenIndex(client.put_manifest(repo, tag, raw, OCI_INDEX), changed=True)


def index_bytes(descriptors: Sequence[Mapping[str, object]], annotations: dict[str, str] | None = None) -> bytes:
    ordered = sorted(descriptors, key=lambda d: json.dumps(d["platform"], sort_keys=True))
    index: dict[str, object] = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": ordered}
    if annotations:
        index["annotations"] = dict(sorted(annotations.items()))
    return json.dumps(index, sort_keys=True, separators=(",", ":")).encode()


def _descriptor(client: Distribution, repo: RepoRef, entry: IndexEntry) -> dict[str, object]:
    manifest = client.manifest(repo, entry.digest)
    if manifest is None:
        raise PushError(f"{repo}@{entry.digest} does not exist: push the {entry.platform} image first")
    if manifest.is_index:
        raise UsageError(f"{repo}@{entry.digest} is an index itself, not a {entry.platform} image manifest")
    config_digest = (manifest.data.get("config") or {}).get("digest")
    config = client.blob_json(repo, str(config_digest)) if config_digest else {}
    wanted = normalize_platform(entry.platform)
    if platform_of(config) != wanted:
        raise UsageError(f"{repo}@{entry.digest} is a {platform_of(config)} image, not {wanted}")
    return {
        "mediaType": manifest.media_type,
        "digest": manifest.digest,
        "size": len(manifest.raw),
        "platform": platform_fields(wanted),
    }
