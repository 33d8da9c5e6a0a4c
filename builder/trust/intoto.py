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


def problem(statement: object) -> str | None:
    """What keeps `statement` from being an in-toto Statement v1 (None: nothing): `_type`, a non-empty `subject`
    list whose every entry has a non-empty `digest` of lowercase algorithm names to hex strings, a string
    `predicateType` and, where given, an object `predicate`."""
    if not isinstance(statement, Mapping) or statement.get("_type") != STATEMENT_TYPE:
        return f"_type is not {STATEMENT_TYPE}"
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        return "no subject"
    wrong = next((entry for entry in subjects if not _subject_ok(entry)), None)
    if wrong is not None:
        return f"a subject without a string name and a digest of hex strings: {json.dumps(wrong)[:200]}"
    if not isinstance(statement.get("predicateType"), str) or not statement["predicateType"]:
        return "no predicateType"
    if "predicate" in statement and not isinstance(statement["predicate"], Mapping):
        return "a predicate that is not an object"
    return None


def _subject_ok(entry: object) -> bool:
    digest = entry.get("digest") if isinstance(entry, Mapping) else None
    if not isinstance(entry, Mapping) or not isinstance(digest, Mapping) or not digest:
        return False
    return isinstance(entry.get("name", ""), str) and all(_hex_digest(k, v) for k, v in digest.items())


def _hex_digest(algorithm: object, value: object) -> bool:
    return (isinstance(algorithm, str) and algorithm == algorithm.lower() and isinstance(value, str) and bool(value)
            and all(c in "0123456789abcdef" for c in value))  # fmt: skip
