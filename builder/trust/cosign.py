"""Signatures as cosign writes them, so that cosign, skopeo and podman verify them with the team's public key:
a "simple signing" payload naming the image's repository and manifest digest, signed with ECDSA P-256, stored
as a layer of an OCI image manifest under the tag `sha256-<hex>.sig` with the base64 signature in the layer's
annotation `dev.cosignproject.cosign/signature` (skopeo / podman: registries.d `use-sigstore-attachments: true`).

A digest that already carries a signature by this key is not signed again; a signature by another key is
kept (cosign appends, too).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.oci.client import OCI_MANIFEST, Distribution, Manifest, digest_of
from builder.oci.referrers import sig_tag
from builder.oci.refs import DOCKER_HUB, RepoRef
from builder.trust.keys import SigningKey, verifies

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from cryptography.hazmat.primitives.asymmetric import ec

PAYLOAD_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
SIGNATURE_KIND = "cosign container image signature"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"


@dataclass(frozen=True)
class Signature:
    payload: bytes
    signature: str  # base64 DER


def identity(repo: RepoRef) -> str:
    """The repository as skopeo and podman name it in a signature: Docker Hub as docker.io."""
    return f"docker.io/{repo.name}" if repo.host == DOCKER_HUB else str(repo)


def payload(repository: str, digest: str) -> bytes:
    """cosign's payload, its field order and all (`optional` null: no annotations are signed)."""
    critical = {
        "identity": {"docker-reference": repository},
        "image": {"docker-manifest-digest": digest},
        "type": SIGNATURE_KIND,
    }
    return json.dumps({"critical": critical, "optional": None}, separators=(",", ":")).encode()


def signatures(client: Distribution, repo: RepoRef, digest: str) -> Iterator[Signature]:
    """Every cosign signature stored for `digest` (none when its .sig tag does not exist)."""
    found = client.manifest(repo, sig_tag(digest))
    for layer in (found.data.get("layers") or []) if found is not None else []:
        annotation = (layer.get("annotations") or {}).get(SIGNATURE_ANNOTATION)
        if layer.get("mediaType") == PAYLOAD_TYPE and annotation:
            yield Signature(client.blob(repo, str(layer["digest"])), str(annotation))


def signed_by(client: Distribution, repo: RepoRef, digest: str, key: ec.EllipticCurvePublicKey) -> str | None:
    """None when a signature by `key` names exactly this repository and digest; else why not."""
    found = list(signatures(client, repo, digest))
    if not found:
        return f"no signature: {repo}:{sig_tag(digest)} does not exist"
    for item in found:
        if verifies(key, item.payload, item.signature):
            return _payload_problem(item.payload, identity(repo), digest)
    return f"{len(found)} signature(s) for {digest}, none made with this key"


def _payload_problem(raw: bytes, repository: str, digest: str) -> str | None:
    try:
        critical = json.loads(raw)["critical"]
        named = (critical["image"]["docker-manifest-digest"], critical["identity"]["docker-reference"])
    except (ValueError, KeyError, TypeError):
        return "the signed payload is not a simple-signing payload"
    if critical.get("type") != SIGNATURE_KIND:
        return f"the signed payload's type is {critical.get('type')!r}"
    if named[0] != digest:
        return f"the signature is for {named[0]}, not for this image's {digest} (a copy under another digest)"
    if named[1] != repository:
        return f"the signature names the repository {named[1]}, not {repository}"
    return None


def sign(client: Distribution, repo: RepoRef, digest: str, key: SigningKey) -> int:
    """Store a signature of `digest` by `key`: the bytes written (payload, config, manifest); 0 when one by this
    key was already there."""
    existing = client.manifest(repo, sig_tag(digest))
    if any(verifies(key.public(), s.payload, s.signature) for s in signatures(client, repo, digest)):
        return 0
    body = payload(identity(repo), digest)
    layer = {"mediaType": PAYLOAD_TYPE, "digest": digest_of(body), "size": len(body),
             "annotations": {SIGNATURE_ANNOTATION: key.sign(body)}}  # fmt: skip
    return append_layers(client, repo, sig_tag(digest), existing, [(layer, body)])


def append_layers(
    client: Distribution, repo: RepoRef, tag: str, existing: Manifest | None, added: list[tuple[dict[str, Any], bytes]]
) -> int:
    """Write cosign's signature image under `tag`: the layers it held plus `added` (descriptor, blob), a config
    naming them all, the manifest (cosign appends too: pkg/oci/mutate/signatures.go). The bytes written."""
    layers = [*(existing.data.get("layers") or [] if existing is not None else []), *(d for d, _ in added)]
    config = _config([str(item["digest"]) for item in layers])
    for blob in (*(b for _, b in added), config):
        if not client.blob_exists(repo, digest_of(blob), push=True):
            client.upload(repo, blob)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": CONFIG_TYPE, "digest": digest_of(config), "size": len(config)},
        "layers": layers,
    }
    raw = json.dumps(manifest, separators=(",", ":")).encode()
    client.put_manifest(repo, tag, raw, OCI_MANIFEST)
    return sum(len(b) for _, b in added) + len(config) + len(raw)


def signer(client: Distribution, repo: RepoRef, key: SigningKey) -> Callable[[list[str]], list[str]]:
    """A `before_tag` for oci/zstd.py's copies: signs each digest in `repo`; returns those signed in this call."""

    def sign_each(digests: list[str]) -> list[str]:
        return [digest for digest in digests if sign(client, repo, digest, key)]

    return sign_each


def _config(layer_digests: list[str]) -> bytes:
    """cosign's config of a signature image: empty but for the layers' ids, one history entry per layer (the
    bytes cosign 2.5.0 wrote here for its attestations: tests/unit/test_cosign_att.py)."""
    never = "0001-01-01T00:00:00Z"
    data: dict[str, Any] = {
        "architecture": "",
        "created": never,
        "history": [{"created": never} for _ in layer_digests],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
        "config": {},
    }
    return json.dumps(data, separators=(",", ":")).encode()
