"""OCI 1.1 artifacts that refer to an image (its SBOM, its provenance): written as image manifests with an
`artifactType` and a `subject`, and found again through the referrers API, or, on a registry without it
(docker-registry 2.8), through the referrers tag schema the OCI distribution spec gives for that case: an
image index under the tag `sha256-<hex of the subject>` that lists each referrer's descriptor.

cosign's signatures (builder/trust/cosign.py) use a tag of their own, `sha256-<hex>.sig`; `sig_tag` names it. Its
attestations (builder/trust/cosign_att.py) another, `sha256-<hex>.att`: `att_tag`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from builder.oci.client import OCI_INDEX, OCI_MANIFEST, Distribution, Manifest, digest_of
from builder.oci.refs import RepoRef

EMPTY = b"{}"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"  # the config of an artifact that has none


@dataclass(frozen=True)
class Attached:
    digest: str  # the artifact manifest's digest
    fallback: bool  # True: listed under the sha256-<hex> tag (the registry has no referrers API)
    bytes: int = 0  # written: the content, the artifact manifest (and the fallback index)


def referrers_tag(digest: str) -> str:
    return digest.replace(":", "-")


def sig_tag(digest: str) -> str:
    return f"{referrers_tag(digest)}.sig"


def att_tag(digest: str) -> str:
    return f"{referrers_tag(digest)}.att"


def descriptor(manifest: Manifest) -> dict[str, Any]:
    return {"mediaType": manifest.media_type, "digest": manifest.digest, "size": len(manifest.raw)}


def attach(
    client: Distribution,
    repo: RepoRef,
    subject: Manifest,
    artifact_type: str,
    content: bytes,
    annotations: dict[str, str],
) -> Attached:
    """Upload `content` as a one-layer artifact referring to `subject`; list it in the fallback index when
    the registry did not take the subject itself (no OCI-Subject header in its answer)."""
    for blob in (EMPTY, content):
        if not client.blob_exists(repo, digest_of(blob), push=True):
            client.upload(repo, blob)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": digest_of(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": artifact_type, "digest": digest_of(content), "size": len(content)}],
        "subject": descriptor(subject),
        "annotations": dict(sorted(annotations.items())),
    }
    raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    put = put_referrer(client, repo, subject.digest, raw)
    return Attached(put.digest, put.fallback, len(content) + put.bytes)


def put_referrer(client: Distribution, repo: RepoRef, subject: str, raw: bytes) -> Attached:
    """PUT an artifact manifest that names `subject` (its blobs already in `repo`), byte for byte, and list it
    in the fallback index when the registry did not take the subject itself (no OCI-Subject header)."""
    manifest = json.loads(raw)
    digest, reply = client.put_manifest_reply(repo, digest_of(raw), raw, OCI_MANIFEST)
    if reply.header("oci-subject") == subject:
        return Attached(digest, fallback=False, bytes=len(raw))
    entry = {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(raw), "artifactType": manifest["artifactType"]}
    entry["annotations"] = manifest.get("annotations") or {}
    return Attached(digest, fallback=True, bytes=len(raw) + _add_to_fallback(client, repo, subject, entry))


def _add_to_fallback(client: Distribution, repo: RepoRef, subject: str, entry: dict[str, Any]) -> int:
    """The fallback index with `entry` added (the bytes of the index written; 0 when it was listed already)."""
    tag = referrers_tag(subject)
    found = client.manifest(repo, tag)
    listed = list((found.data.get("manifests") or []) if found is not None else [])
    if any(item.get("digest") == entry["digest"] for item in listed):
        return 0
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [*listed, entry]}
    raw = json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
    client.put_manifest(repo, tag, raw, OCI_INDEX)
    return len(raw)


def referrers(
    client: Distribution, repo: RepoRef, subject: str, artifact_type: str | None = None
) -> list[dict[str, Any]]:
    """The descriptors of the artifacts referring to `subject` (of one type when given): the referrers API's
    answer where the registry has one, else the fallback tag's index."""
    found = client.referrers(repo, subject)
    if found is None:
        fallback = client.manifest(repo, referrers_tag(subject))
        found = fallback.data if fallback is not None else {}
    listed = [dict(item) for item in found.get("manifests") or []]
    return [item for item in listed if artifact_type is None or item.get("artifactType") == artifact_type]


def artifact_content(client: Distribution, repo: RepoRef, digest: str, subject: str) -> bytes | None:
    """The one layer of an artifact manifest, when the manifest still names `subject`; None otherwise."""
    manifest = client.manifest(repo, digest)
    if manifest is None or (manifest.data.get("subject") or {}).get("digest") != subject:
        return None
    layers = manifest.data.get("layers") or []
    return client.blob(repo, str(layers[0]["digest"])) if len(layers) == 1 else None
