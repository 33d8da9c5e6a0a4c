"""An image's attestations carried along when it is promoted to another repository, and the image signed there.

`torchyard build --push --attest` attaches the SBOM and provenance to the candidate it pushed; `torchyard
promote --attest` copies both (byte for byte: they name the image's digest, which promotion keeps) into the
public repository and, with a key, signs the image and both attachments there, and writes both as cosign
attestations there (the .att tag: builder/trust/attest.py's write_att; the provenance statement byte for byte, so
its subject still names the candidates repository where the image was built). A signature names its
repository, so one made in the candidates repository would not verify in the public one: signing happens
here, after the GPU smoke suite passed and before the public tag is written (oci/promote.py's `before_tag`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from builder.core.errors import PushError
from builder.oci.client import Distribution, Manifest
from builder.oci.promote import BeforeTag, Promotion, copy_blobs
from builder.oci.referrers import put_referrer, referrers
from builder.oci.refs import RepoRef
from builder.trust import cosign, sbom, slsa
from builder.trust.attest import write_att
from builder.trust.keys import SigningKey

CARRIED = {sbom.MEDIA_TYPE: "SBOM", slsa.MEDIA_TYPE: "provenance"}


@dataclass
class Carried:
    copied: list[str] = field(default_factory=list)  # artifact digests copied in this run
    present: list[str] = field(default_factory=list)  # already in the target repository
    signed: list[str] = field(default_factory=list)  # digests signed in this run
    attested: list[str] = field(default_factory=list)  # images whose cosign attestations (.att) this run wrote
    key: bool = False  # whether a key signed (a run without one carries the attestations unsigned)
    bytes: int = 0

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        moved = f"attestations: {len(self.copied)} copied, {len(self.present)} already there"
        if not self.key:
            return f"{moved}; not signed (no --sign-key or $TORCHYARD_SIGN_KEY)"
        written = f"{len(self.signed)} signature(s) written, cosign attestations of {len(self.attested)} image(s)"
        return f"{moved}; {written} ({self.bytes} bytes in all)"


def carry(client: Distribution, source: RepoRef, target: RepoRef, key: SigningKey | None) -> tuple[Carried, BeforeTag]:
    """(the record, a `before_tag` for oci.promote.promote that fills it in)."""
    done = Carried(key=key is not None)

    def before_tag(manifest: Manifest, images: list[Manifest]) -> None:
        signable = [manifest.digest] if manifest.is_index else []
        for image in images:
            signable += [image.digest, *(_one(client, source, target, image.digest, t, done) for t in CARRIED)]
        if key is None:
            return
        for digest in signable:
            written = cosign.sign(client, target, digest, key)
            if written:
                done.signed.append(digest)
                done.bytes += written
        for image in images:
            written = write_att(client, target, image.digest, key, {})
            if written:
                done.attested.append(image.digest)
                done.bytes += written

    return done, before_tag


def _one(client: Distribution, source: RepoRef, target: RepoRef, subject: str, kind: str, done: Carried) -> str:
    """The artifact of this kind naming `subject` in `target`, copied from `source` when it is not there yet."""
    there = referrers(client, target, subject, kind)
    if there:
        done.present.append(str(there[0]["digest"]))
        return str(there[0]["digest"])
    found = referrers(client, source, subject, kind)
    artifact = client.manifest(source, str(found[0]["digest"])) if found else None
    if artifact is None:
        raise PushError(
            f"{source}@{subject[:19]} has no {CARRIED[kind]} attached: build it with --attest (or rerun that "
            "build: it attests without rebuilding); the tag was not moved"
        )
    copy_blobs(client, source, target, artifact, Promotion(str(source), str(target)))
    put = put_referrer(client, target, subject, artifact.raw)
    done.copied.append(put.digest)
    done.bytes += put.bytes
    return put.digest
