"""`torchyard matrix lock`: resolve every base image tag the templates can produce to its digest per platform
(the registry's OCI distribution API, anonymous tokens for public images) and write matrix.lock."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from builder.core.errors import PushError, UpstreamError
from builder.matrix.lock import BaseLock, LockedImage
from builder.matrix.model import Matrix
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref
from builder.upstream.claims import Where
from builder.upstream.images import ImageClaim, image_claims, mirror_image


@dataclass(frozen=True)
class LockChange:
    ref: str
    platform: str
    before: str | None
    after: str


def make_lock(m: Matrix, client: Distribution, path: str, mirror: str | None = None) -> BaseLock:
    """A lock of every base image for every platform the matrix builds on it. PushError (exit 5) when a
    tag or one of its platforms cannot be resolved: a partial lock would let --locked renders fail later."""
    claims = image_claims(m, Where(m.path))
    images = client.http.map(lambda claim: _resolve(client, claim, mirror), claims)
    resolved = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return BaseLock(path, resolved, tuple(images))


def _resolve(client: Distribution, claim: ImageClaim, mirror: str | None) -> LockedImage:
    asked = parse_ref(mirror_image(claim.ref, mirror))
    try:
        manifest = client.manifest(asked.repo, asked.reference)
        platforms = client.platforms(asked.repo, asked.reference) if manifest is not None else None
    except (UpstreamError, PushError) as exc:
        raise PushError(f"{claim.ref}: {exc}") from None
    if manifest is None or platforms is None:
        raise PushError(f"{claim.ref}: the registry has no such tag ({claim.where}); nothing locked")
    missing = [p for p in claim.platforms if p not in platforms]
    if missing:
        raise PushError(
            f"{claim.ref}: no {', '.join(missing)} image under the tag (has: {', '.join(sorted(platforms))})"
        )
    return LockedImage(claim.ref, manifest.digest, {p: platforms[p] for p in claim.platforms})


def changes(old: BaseLock | None, new: BaseLock) -> list[LockChange]:
    """What moved: per image and platform, the digest before (None: not locked) and after."""
    found = []
    for image in new.images:
        before = old.get(image.ref) if old else None
        for platform, digest in sorted(image.platforms.items()):
            was = before.platforms.get(platform) if before else None
            if was != digest:
                found.append(LockChange(image.ref, platform, was, digest))
    return found
