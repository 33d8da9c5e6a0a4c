"""Attach an image's SBOM and provenance in its registry, and sign the image and both attachments, after the
smoke suite passed and before any alias moves (builder/pipeline/pipeline.py calls this between the immutable tag's
push and the aliases'). With a key, both are also written as cosign attestations (DSSE envelopes under the
image's `sha256-<hex>.att` tag: builder/trust/cosign_att.py), the form `cosign verify-attestation` and admission
controllers read; the referrers stay, for registries and tools that list OCI 1.1 artifacts.

Idempotent: what the registry already holds for the digest (an SBOM, a provenance statement, a signature by
this key) is not written again, so a rerun after a refused upload finishes the job without rebuilding, and
reads the image's contents only when an SBOM is still missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from builder.core.errors import PushError
from builder.oci.client import Distribution, Manifest
from builder.oci.referrers import artifact_content, attach, referrers
from builder.oci.refs import RepoRef
from builder.trust import cosign, cosign_att, intoto, sbom, slsa
from builder.trust.inventory import Inventory
from builder.trust.keys import SigningKey

# what each attachment (by its artifact type) is as a cosign attestation: its predicate type
PREDICATE_TYPES = {sbom.MEDIA_TYPE: intoto.CYCLONEDX, slsa.MEDIA_TYPE: slsa.PREDICATE_TYPE}


@dataclass(frozen=True, kw_only=True)
class TrustSettings:
    """What a build needs to attest: the key (None: SBOM and provenance unsigned) and its facts."""

    key: SigningKey | None = field(default=None, repr=False)
    facts: dict[str, str | None] = field(default_factory=dict)  # SBOM properties: matrix commit, combination
    builder_id: str = slsa.LOCAL_BUILDER
    materials: tuple[slsa.Material, ...] = ()  # matrix.toml, base images: the build adds the Dockerfile
    # the SBOM's wheel hashes from the build's indexes (its torch index first): builder/lock/sbom_hashes.py
    wheel_hashes: Callable[[Inventory, tuple[str, ...]], Inventory] | None = field(default=None, compare=False)


def signing_key_of(trust: TrustSettings | None) -> SigningKey | None:
    """The key a build's or a publish's trust settings sign with (None: no trust settings, or no key)."""
    return trust.key if trust is not None else None


@dataclass
class Attested:
    digest: str  # the image's
    sbom: str = ""  # the artifact manifests' digests
    provenance: str = ""
    signed: list[str] = field(default_factory=list)  # digests signed in this run
    written: list[str] = field(default_factory=list)  # what this run wrote: sbom, provenance, signature, attestation
    bytes: int = 0  # written to the registry: documents, artifact manifests, fallback indexes, signatures, .att
    read_seconds: float = 0.0  # of which reading the image's contents (a container run)
    seconds: float = 0.0
    fallback: bool | None = None  # listed under the sha256-<hex> tag (no referrers API); None: nothing attached now


@dataclass(frozen=True, kw_only=True)
class Target:
    """The image in its registry, and how to read its contents when its SBOM must be made."""

    client: Distribution
    repo: RepoRef
    manifest: Manifest
    subject: sbom.Subject
    contents: Callable[[], Inventory]


def attest(target: Target, settings: TrustSettings, facts: slsa.BuildFacts) -> Attested:
    start = time.monotonic()
    done = Attested(target.manifest.digest)
    made: dict[str, bytes] = {}  # the documents this run wrote, by artifact type: not read back for the .att
    inventory: Inventory | None = None
    found = _existing(target, sbom.MEDIA_TYPE)
    if found is None:
        inventory = _read(target, done)
        text = sbom.make_sbom(inventory, target.subject, settings.facts, facts.finished or datetime.now(UTC))
        made[sbom.MEDIA_TYPE] = text.encode()
        found = _attach(target, sbom.MEDIA_TYPE, made[sbom.MEDIA_TYPE], done, "sbom")
    done.sbom = found
    found = _existing(target, slsa.MEDIA_TYPE)
    if found is None:
        inventory = inventory or _read(target, done)
        made[slsa.MEDIA_TYPE] = slsa.make_statement(target.subject.repo, done.digest, facts, inventory).encode()
        found = _attach(target, slsa.MEDIA_TYPE, made[slsa.MEDIA_TYPE], done, "provenance")
    done.provenance = found
    if settings.key is not None:
        _sign(target, settings.key, done, made)
    done.seconds = time.monotonic() - start
    return done


def _sign(target: Target, key: SigningKey, done: Attested, made: Mapping[str, bytes]) -> None:
    for digest in (done.digest, done.sbom, done.provenance):
        written = cosign.sign(target.client, target.repo, digest, key)
        if written:
            done.signed.append(digest)
            done.bytes += written
    if done.signed:
        done.written.append("signature")
    written = write_att(target.client, target.repo, done.digest, key, made)
    if written:
        done.written.append("attestation")
        done.bytes += written


def write_att(client: Distribution, repo: RepoRef, digest: str, key: SigningKey, made: Mapping[str, bytes]) -> int:
    """The SBOM and the provenance attached to `digest`, also as cosign attestations signed with `key`, where the
    .att tag lacks them: the bytes written (0: none lacking). `made`: documents by artifact type that this run
    made (the others are read back from the registry)."""
    lacking = cosign_att.missing(client, repo, digest, key, list(PREDICATE_TYPES.values()))
    statements = {
        predicate_type: _statement(client, repo, digest, artifact_type, made)
        for artifact_type, predicate_type in PREDICATE_TYPES.items()
        if predicate_type in lacking
    }
    return cosign_att.add(client, repo, digest, key, statements) if statements else 0


def _statement(
    client: Distribution, repo: RepoRef, digest: str, artifact_type: str, made: Mapping[str, bytes]
) -> bytes:
    """The in-toto statement to sign: the provenance is one already (signed byte for byte, as it is attached);
    the SBOM becomes the predicate of one about this repository and digest."""
    content = made.get(artifact_type)
    if content is None:
        found = read_attached(client, repo, digest, artifact_type)
        if found is None:
            raise PushError(f"{repo}@{digest[:19]}: no {artifact_type} attached to sign as a cosign attestation")
        content = found[1]
    if artifact_type == slsa.MEDIA_TYPE:
        return content
    return intoto.statement(str(repo), digest, intoto.CYCLONEDX, json.loads(content))


def _read(target: Target, done: Attested) -> Inventory:
    start = time.monotonic()
    found = target.contents()
    done.read_seconds = time.monotonic() - start
    return found


def _existing(target: Target, artifact_type: str) -> str | None:
    listed = referrers(target.client, target.repo, target.manifest.digest, artifact_type)
    return str(listed[0]["digest"]) if listed else None


def _attach(target: Target, artifact_type: str, content: bytes, done: Attested, what: str) -> str:
    annotations = {"org.opencontainers.image.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    attached = attach(target.client, target.repo, target.manifest, artifact_type, content, annotations)
    done.bytes += attached.bytes
    done.fallback = attached.fallback
    done.written.append(what)
    return attached.digest


def read_attached(client: Distribution, repo: RepoRef, digest: str, artifact_type: str) -> tuple[str, bytes] | None:
    """(artifact digest, content) of the first attachment of this type that names `digest`; None when none."""
    for item in referrers(client, repo, digest, artifact_type):
        content = artifact_content(client, repo, str(item["digest"]), digest)
        if content is not None:
            return str(item["digest"]), content
    return None
