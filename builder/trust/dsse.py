"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol.md and envelope.md), the form cosign signs
attestations in: the payload is signed through its pre-authentication encoding (PAE), which binds the payload
type to the bytes, so a payload cannot be replayed under another type.

An envelope is JSON `{"payloadType": ..., "payload": <base64>, "signatures": [{"keyid": "", "sig": <base64>}]}`,
keys in the order and with the empty keyid that cosign 2.5 writes (sigstore's dsse.WrapSigner): a verifier with
a keyid of its own only skips a signature whose non-empty keyid differs (go-securesystemslib's dsse/verify.go).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.trust.keys import SigningKey, verifies

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from cryptography.hazmat.primitives.asymmetric import ec

IN_TOTO = "application/vnd.in-toto+json"  # the payload type of an in-toto statement
MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"  # an envelope as an OCI layer


def pae(payload_type: str, body: bytes) -> bytes:
    """What is signed: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal of bytes."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def seal(body: bytes, key: SigningKey, payload_type: str = IN_TOTO) -> bytes:
    """The envelope of `body` signed with `key` (ECDSA P-256, SHA-256, ASN.1 DER), as compact JSON."""
    signature = {"keyid": "", "sig": key.sign(pae(payload_type, body))}
    envelope = {"payloadType": payload_type, "payload": base64.b64encode(body).decode(), "signatures": [signature]}
    return json.dumps(envelope, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    body: bytes  # the payload, decoded
    signatures: tuple[str, ...]  # base64 DER, as stored

    def signed_by(self, key: ec.EllipticCurvePublicKey) -> bool:
        signed = pae(self.payload_type, self.body)
        return any(verifies(key, signed, signature) for signature in self.signatures)


def parse(raw: bytes) -> Envelope:
    """An envelope read from a registry; ValueError (with what is wrong) for anything else."""
    try:
        data = json.loads(raw)
        signatures = tuple(str(item["sig"]) for item in data["signatures"])
        return Envelope(str(data["payloadType"]), _b64(str(data["payload"])), signatures)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a DSSE envelope ({type(exc).__name__}: {str(exc)[:120]})") from None


def _b64(text: str) -> bytes:
    """Standard base64, else URL-safe: DSSE allows either (go-securesystemslib's b64Decode tries both)."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return base64.b64decode(text, altchars=b"-_", validate=True)
