"""`torchyard verify-image REF`: is the image under REF signed with the team's key, and does it carry an SBOM
and a provenance statement about exactly its digest (each signed too)? Read from the registry only. Both are
checked in the two forms torchyard writes: OCI referrers with cosign signatures, and cosign attestations (signed
DSSE envelopes under the `.att` tag: what `cosign verify-attestation` reads).

Each image is checked by its manifest digest: a copy with one label changed has another digest, so neither the
signature nor the attachments of the original count for it. For an index, its own signature (of the index
digest: a changed member list is another index) and then every platform's image.
Without --key the signatures cannot be checked: they are "not checked", and the answer is CANNOT TELL (6).
Several keys (a key rotation: the old and the new one, docs/trust.md): a signature or attestation by any of them
passes, and the check names the key that made it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.core.errors import BuildError, PushError, TrustError, UsageError
from builder.core.files import write_report_file
from builder.oci.client import Distribution
from builder.oci.referrers import att_tag
from builder.oci.refs import ImageRef, RepoRef
from builder.trust import cosign, cosign_att, intoto, sbom, slsa
from builder.trust.attest import PREDICATE_TYPES, read_attached

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from cryptography.hazmat.primitives.asymmetric import ec

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"
Problem = Callable[[bytes, str], str | None]  # (content, the image's digest) -> what is wrong, None when nothing
Keys = Mapping[str, "ec.EllipticCurvePublicKey"]  # the keys trusted, by the name a check shows (their file)


@dataclass(frozen=True)
class Check:
    digest: str
    name: str  # signature | sbom | sbom signature | provenance | provenance signature | index signature
    #            | sbom attestation | provenance attestation
    status: str
    detail: str = ""


@dataclass
class Verdict:
    ref: str
    checks: list[Check] = field(default_factory=list)
    documents: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (image digest, sbom|provenance): the
    #                                           attached document, byte for byte, whose own checks passed

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAILED]

    @property
    def unchecked(self) -> list[Check]:
        return [c for c in self.checks if c.status == NOT_CHECKED]

    def as_json(self) -> dict[str, Any]:
        status = FAILED if self.failed else NOT_CHECKED if self.unchecked else PASSED
        return {"schema": 1, "ref": self.ref, "status": status, "checks": [vars(c) for c in self.checks]}


def verify_image(client: Distribution, ref: ImageRef, key: ec.EllipticCurvePublicKey | Keys | None) -> Verdict:
    """Every check of the image under `ref`; `key`: one key, the keys trusted by name, or None (not checked)."""
    keys = _trusted(key)
    found = client.manifest(ref.repo, ref.reference)
    if found is None:
        raise PushError(f"{ref}: the registry holds no such image")
    verdict = Verdict(str(ref))
    digests = [found.digest]
    if found.is_index:  # the index is signed itself, and each platform's image is checked as a single one
        verdict.checks.append(_signature(client, ref.repo, found.digest, found.digest, keys, "index signature"))
        digests = [str(e["digest"]) for e in found.entries()]
    for digest in digests:
        _check_image(client, ref.repo, digest, keys, verdict)
    return verdict


def _trusted(key: ec.EllipticCurvePublicKey | Keys | None) -> Keys:
    if key is None:
        return {}
    if isinstance(key, Mapping):
        return key
    return {"the key": key}


def _check_image(client: Distribution, repo: RepoRef, digest: str, keys: Keys, verdict: Verdict) -> None:
    verdict.checks.append(_signature(client, repo, digest, digest, keys, "signature"))
    for name, media_type, problem in _KINDS:
        attached = read_attached(client, repo, digest, media_type)
        if attached is None:
            verdict.checks.append(Check(digest, name, FAILED, f"no {media_type} artifact refers to {digest}"))
            continue
        why = problem(attached[1], digest)
        verdict.checks.append(Check(digest, name, FAILED if why else PASSED, why or attached[0]))
        if why is None:
            verdict.documents[(digest, name)] = attached[1]
        verdict.checks.append(_signature(client, repo, attached[0], digest, keys, f"{name} signature"))
    for name, media_type, problem in _KINDS:
        verdict.checks.append(_attestation(client, repo, digest, keys, f"{name} attestation", media_type, problem))


def _signature(client: Distribution, repo: RepoRef, signed: str, image: str, keys: Keys, name: str) -> Check:
    if not keys:
        return Check(image, name, NOT_CHECKED, "no --key PUB given: the signature was not checked")
    problems = []
    for key_name, key in keys.items():
        why = cosign.signed_by(client, repo, signed, key)
        if why is None:
            return Check(image, name, PASSED, f"signed with {key_name} ({signed})")
        problems.append(why if len(keys) == 1 else f"{key_name}: {why}")
    return Check(image, name, FAILED, "; ".join(problems))


def _attestation(
    client: Distribution,
    repo: RepoRef,
    digest: str,
    keys: Keys,
    name: str,
    media_type: str,
    problem: Problem,
) -> Check:
    """The cosign attestation of this kind: its envelope signed by one of the keys, its statement about this
    digest, its content as the referrer's is checked. Without a key: not checked (torchyard writes .att only with
    a key)."""
    predicate_type = PREDICATE_TYPES[media_type]
    key_name, found = _attested(client, repo, digest, predicate_type, keys)
    if found.statement is None:
        if not keys and not found.tag_exists:
            return Check(digest, name, NOT_CHECKED, f"{found.problem} (torchyard writes it only with a key)")
        return Check(digest, name, FAILED, found.problem)
    why = problem(_content(found.statement, predicate_type), digest)
    if why:
        return Check(digest, name, FAILED, why)
    if not keys:
        return Check(digest, name, NOT_CHECKED, "no --key PUB given: the envelope's signature was not checked")
    return Check(digest, name, PASSED, f"signed with {key_name} ({predicate_type}, {att_tag(digest)})")


def _attested(
    client: Distribution, repo: RepoRef, digest: str, predicate_type: str, keys: Keys
) -> tuple[str, cosign_att.Found]:
    """The first key whose attestation of this type is found, with it; else the first key's finding (by anyone
    when no key is given)."""
    if not keys:
        return "", cosign_att.find(client, repo, digest, predicate_type, None)
    first: tuple[str, cosign_att.Found] | None = None
    for key_name, key in keys.items():
        found = cosign_att.find(client, repo, digest, predicate_type, key)
        if found.statement is not None:
            return key_name, found
        first = first or (key_name, found)
    assert first is not None
    return first


def _content(statement: bytes, predicate_type: str) -> bytes:
    """What the referrer's check reads: the provenance is the statement; the SBOM, the statement's predicate."""
    if predicate_type == slsa.PREDICATE_TYPE:
        return statement
    return json.dumps(json.loads(statement).get("predicate")).encode()


def _sbom_problem(content: bytes, digest: str) -> str | None:
    try:
        data = json.loads(content)
        sbom.validate(content.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        return f"the SBOM is not JSON: {str(exc)[:200]}"
    except BuildError as exc:  # the schema's verdict
        return str(exc)
    about = ((data.get("metadata") or {}).get("component") or {}).get("version")
    return None if about == digest else f"the SBOM describes {about}, not {digest}"


def _provenance_problem(content: bytes, digest: str) -> str | None:
    try:
        statement = json.loads(content)
    except ValueError:
        return "the provenance is not JSON"
    if not isinstance(statement, dict) or statement.get("predicateType") != slsa.PREDICATE_TYPE:
        kind = statement.get("predicateType") if isinstance(statement, dict) else type(statement).__name__
        return f"not an in-toto v1 SLSA provenance statement ({kind!r})"
    wrong = intoto.problem(statement) or slsa.problem(statement.get("predicate"))
    if wrong:
        return f"not an in-toto v1 SLSA provenance statement: {wrong}"
    subjects = intoto.subject_digests(statement)
    return None if digest in subjects else f"the statement is about {', '.join(subjects)}, not {digest}"


_KINDS: tuple[tuple[str, str, Problem], ...] = (
    ("sbom", sbom.MEDIA_TYPE, _sbom_problem),
    ("provenance", slsa.MEDIA_TYPE, _provenance_problem),
)


def write_documents(verdict: Verdict, targets: dict[str, Path]) -> list[Path]:
    """The verified documents written byte for byte, `targets` by kind (sbom, provenance); only for a verdict
    that passed every check, about one image: TrustError or UsageError otherwise, and nothing written."""
    if verdict.failed or verdict.unchecked:
        raise TrustError(f"{verdict.ref}: not verified: nothing written to {', '.join(map(str, targets.values()))}")
    images = sorted({digest for digest, _ in verdict.documents})
    if len(images) != 1:
        raise UsageError(f"{verdict.ref} is an index of {len(images)} images: --sbom and --provenance write one "
                         f"image's documents; name one: {', '.join(images)}")  # fmt: skip
    for kind, path in targets.items():
        write_report_file(path, verdict.documents[(images[0], kind)])
    return list(targets.values())
