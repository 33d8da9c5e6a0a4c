"""Attestations as cosign 2.5 stores them, so that `cosign verify-attestation --key PUB --type T` and admission
controllers built on cosign (Kyverno's `attestations`) find them: each a DSSE envelope (builder/trust/dsse.py) of
an in-toto statement about the image, signed with the team's key, stored as a layer of one OCI image manifest
under the tag `sha256-<hex of the image>.att`.

What cosign writes and reads, from its source at v2.5.0 (github.com/sigstore/cosign):
- cmd/cosign/cli/attest/attest.go: the envelope (payload type application/vnd.in-toto+json) as the layer, media
  type application/vnd.dsse.envelope.v1+json (types.DssePayloadType), the layer annotation `predicateType`;
- pkg/oci/static/signature.go: an attestation is a signature layer whose `dev.cosignproject.cosign/signature`
  annotation is empty (the signature is inside the envelope); pkg/oci/internal/signature/layer.go refuses a layer
  without that annotation when it reads one back;
- pkg/oci/empty/empty.go, pkg/oci/mutate/signatures.go, pkg/oci/remote/write.go: the same signature image as for
  `.sig` (OCI manifest and config media types), layers appended, under the `att` suffix;
- pkg/cosign/verify.go (verifyOCIAttestation: the payload type, then the DSSE signature over PAE) and
  pkg/cosign/verifiers.go (IntotoSubjectClaimVerifier: a subject's sha256 is the image digest);
- pkg/policy/attestation.go: `--type` selects by the statement's own predicateType, not by the annotation.
cosign 2.5.0 wrote exactly this layout here (`cosign attest --tlog-upload=false`); tests/unit/test_cosign_att.py
holds its bytes. Like the signatures, these carry no transparency-log entry: cosign needs
`--insecure-ignore-tlog=true`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.oci.client import Distribution, digest_of
from builder.oci.referrers import att_tag
from builder.oci.refs import RepoRef
from builder.trust import dsse, intoto
from builder.trust.cosign import SIGNATURE_ANNOTATION, append_layers
from builder.trust.keys import SigningKey

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from cryptography.hazmat.primitives.asymmetric import ec

PREDICATE_ANNOTATION = "predicateType"


@dataclass(frozen=True)
class Found:
    """The statement of the first envelope that passed; else None and why none did."""

    statement: bytes | None
    problem: str = ""
    tag_exists: bool = True


def envelopes(client: Distribution, repo: RepoRef, digest: str) -> list[bytes] | None:
    """The envelopes stored for `digest`, in order; None when its .att tag does not exist."""
    found = client.manifest(repo, att_tag(digest))
    if found is None:
        return None
    layers = found.data.get("layers") or []
    return [client.blob(repo, str(layer["digest"])) for layer in layers if layer.get("mediaType") == dsse.MEDIA_TYPE]


def find(
    client: Distribution, repo: RepoRef, digest: str, predicate_type: str, key: ec.EllipticCurvePublicKey | None
) -> Found:
    """A statement of `predicate_type` about `digest` in an envelope signed by `key` (by anyone when None: the
    caller then says the signature was not checked), as cosign verify-attestation selects one."""
    stored = envelopes(client, repo, digest)
    if stored is None:
        return Found(None, f"no attestation: {repo}:{att_tag(digest)} does not exist", tag_exists=False)
    return _first(stored, digest, predicate_type, key) or Found(
        None, f"no {predicate_type} attestation under {repo}:{att_tag(digest)}"
    )


def missing(client: Distribution, repo: RepoRef, digest: str, key: SigningKey, types: list[str]) -> list[str]:
    """The predicate types of which the .att tag of `digest` holds no statement signed by `key`."""
    stored = envelopes(client, repo, digest) or []
    found = [_first(stored, digest, predicate_type, key.public()) for predicate_type in types]
    return [t for t, one in zip(types, found, strict=True) if one is None or one.statement is None]


def _first(
    stored: list[bytes], digest: str, predicate_type: str, key: ec.EllipticCurvePublicKey | None
) -> Found | None:
    """The first envelope of this type that passes; else why the first of this type failed; None: none of it."""
    problems = []
    for raw in stored:
        why = _problem(raw, digest, predicate_type, key)
        if why is None:
            return Found(dsse.parse(raw).body)
        if why != _OTHER_TYPE:
            problems.append(why)
    return Found(None, problems[0]) if problems else None


_OTHER_TYPE = "another predicate type"


def _problem(raw: bytes, digest: str, predicate_type: str, key: ec.EllipticCurvePublicKey | None) -> str | None:
    try:
        envelope, statement = _opened(raw)
    except ValueError as exc:
        return str(exc)
    if statement.get("predicateType") != predicate_type:
        return _OTHER_TYPE
    if envelope.payload_type != dsse.IN_TOTO:
        return f"the {predicate_type} envelope's payload type is {envelope.payload_type!r}, not {dsse.IN_TOTO}"
    if key is not None and not envelope.signed_by(key):
        return f"the {predicate_type} attestation is not signed with this key"
    subjects = intoto.subject_digests(statement)
    if digest not in subjects:
        about = ", ".join(subjects)
        return f"the {predicate_type} statement is about {about}, not {digest} (a copy under another digest)"
    return None


def _opened(raw: bytes) -> tuple[dsse.Envelope, dict[str, Any]]:
    envelope = dsse.parse(raw)
    statement = json.loads(envelope.body)
    if not isinstance(statement, dict):
        raise ValueError("the envelope's payload is not an in-toto statement")
    return envelope, statement


def add(client: Distribution, repo: RepoRef, digest: str, key: SigningKey, statements: Mapping[str, bytes]) -> int:
    """Append an envelope signed by `key` of each statement (predicate type -> statement bytes) to the .att tag
    of `digest` (what `missing` named): the bytes written."""
    added = []
    for predicate_type, statement in statements.items():
        body = dsse.seal(statement, key)
        annotations = {SIGNATURE_ANNOTATION: "", PREDICATE_ANNOTATION: predicate_type}
        layer = {"mediaType": dsse.MEDIA_TYPE, "digest": digest_of(body), "size": len(body), "annotations": annotations}
        added.append((layer, body))
    return append_layers(client, repo, att_tag(digest), client.manifest(repo, att_tag(digest)), added)
