"""`torchyard verify-image REF`: is the image under REF signed with the team's key, and does it carry an SBOM
and a provenance statement about exactly its digest (each signed too)? Read from the registry only.

Each image is checked by its manifest digest: a copy with one label changed has another digest, so neither the
signature nor the attachments of the original count for it. For an index, its own signature (of the index
digest: a changed member list is another index) and then every platform's image.
Without --key the signatures cannot be checked: they are "not checked", and the answer is CANNOT TELL (6).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from builder.core.errors import BuildError, PushError
from builder.oci.client import Distribution
from builder.oci.refs import ImageRef, RepoRef
from builder.trust import cosign, sbom, slsa
from builder.trust.attest import read_attached

if TYPE_CHECKING:  # cryptography loads where a key is used (builder/trust/keys.py)
    from cryptography.hazmat.primitives.asymmetric import ec

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"


@dataclass(frozen=True)
class Check:
    digest: str
    name: str  # signature | sbom | provenance | sbom signature | provenance signature | index signature
    status: str
    detail: str = ""


@dataclass
class Verdict:
    ref: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAILED]

    @property
    def unchecked(self) -> list[Check]:
        return [c for c in self.checks if c.status == NOT_CHECKED]

    def as_json(self) -> dict[str, Any]:
        status = FAILED if self.failed else NOT_CHECKED if self.unchecked else PASSED
        return {"schema": 1, "ref": self.ref, "status": status, "checks": [vars(c) for c in self.checks]}


def verify_image(client: Distribution, ref: ImageRef, key: ec.EllipticCurvePublicKey | None) -> Verdict:
    found = client.manifest(ref.repo, ref.reference)
    if found is None:
        raise PushError(f"{ref}: the registry holds no such image")
    verdict = Verdict(str(ref))
    digests = [found.digest]
    if found.is_index:  # the index is signed itself, and each platform's image is checked as a single one
        verdict.checks.append(_signature(client, ref.repo, found.digest, found.digest, key, "index signature"))
        digests = [str(e["digest"]) for e in found.entries()]
    for digest in digests:
        _check_image(client, ref.repo, digest, key, verdict)
    return verdict


def _check_image(
    client: Distribution, repo: RepoRef, digest: str, key: ec.EllipticCurvePublicKey | None, verdict: Verdict
) -> None:
    verdict.checks.append(_signature(client, repo, digest, digest, key, "signature"))
    for name, media_type, problem in (
        ("sbom", sbom.MEDIA_TYPE, _sbom_problem),
        ("provenance", slsa.MEDIA_TYPE, _provenance_problem),
    ):
        attached = read_attached(client, repo, digest, media_type)
        if attached is None:
            verdict.checks.append(Check(digest, name, FAILED, f"no {media_type} artifact refers to {digest}"))
            continue
        why = problem(attached[1], digest)
        verdict.checks.append(Check(digest, name, FAILED if why else PASSED, why or attached[0]))
        verdict.checks.append(_signature(client, repo, attached[0], digest, key, f"{name} signature"))


def _signature(
    client: Distribution, repo: RepoRef, signed: str, image: str, key: ec.EllipticCurvePublicKey | None, name: str
) -> Check:
    if key is None:
        return Check(image, name, NOT_CHECKED, "no --key PUB given: the signature was not checked")
    why = cosign.signed_by(client, repo, signed, key)
    return Check(image, name, FAILED if why else PASSED, why or f"signed with the key ({signed})")


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
    if statement.get("_type") != slsa.STATEMENT_TYPE or statement.get("predicateType") != slsa.PREDICATE_TYPE:
        return f"not an in-toto v1 SLSA provenance statement ({statement.get('predicateType')!r})"
    subjects = slsa.subject_digests(statement)
    return None if digest in subjects else f"the statement is about {', '.join(subjects)}, not {digest}"
