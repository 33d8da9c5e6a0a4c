"""in-toto Statements v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md): a predicate
about subjects named with their digests. The provenance (builder/trust/slsa.py) is one; the SBOM becomes one
when it is signed as a cosign attestation (builder/trust/cosign_att.py), its CycloneDX document the predicate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
CYCLONEDX = "https://cyclonedx.org/bom"  # cosign's `--type cyclonedx` (in-toto-golang's PredicateCycloneDX)


def subject(name: str, digest: str) -> list[dict[str, Any]]:
    """The one subject of an image's statement: its repository and its manifest digest (hex, no "sha256:")."""
    return [{"name": name, "digest": {"sha256": digest.removeprefix("sha256:")}}]


def statement(name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> bytes:
    """Compact JSON with sorted keys: the same predicate about the same image gives the same bytes."""
    data = {"_type": STATEMENT_TYPE, "subject": subject(name, digest), "predicateType": predicate_type,
            "predicate": predicate}  # fmt: skip
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def subject_digests(statement: Mapping[str, Any]) -> Sequence[str]:
    """The sha256 digests a statement is about (verify-image compares them with the image's)."""
    return [f"sha256:{s.get('digest', {}).get('sha256', '')}" for s in statement.get("subject") or []]
