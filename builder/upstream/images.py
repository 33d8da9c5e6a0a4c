"""Base images: every tag the templates can produce (computed by the render's own `bases()` over every
valid combination and both strategies), the platforms the matrix builds on each, and their check against
the registries (the tag exists, has each platform; a lock's digests are still what the tag serves)."""

from __future__ import annotations

from dataclasses import dataclass

from builder.core.errors import PushError, RenderError, UpstreamError
from builder.core.kinds import Platform, Strategy
from builder.matrix.lock import BaseLock
from builder.matrix.model import CudaImage, Matrix
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref
from builder.render.context import bases
from builder.resolve.query import Query
from builder.resolve.resolver import lookup
from builder.upstream.claims import Where
from builder.upstream.report import Finding, Status

Platforms = dict[str, str] | None | str  # platform -> digest, no such tag, or why it could not be read


@dataclass(frozen=True)
class ImageClaim:
    ref: str
    platforms: tuple[str, ...]
    where: str
    combinations: int  # how many valid combinations use it


def image_claims(m: Matrix, where: Where) -> list[ImageClaim]:
    used: dict[str, tuple[set[str], str, int]] = {}
    valid = [r for platform in Platform for r in lookup(m, Query(platform=platform)).valid]
    for result in valid:
        c = result.combo
        platforms = {c.platform.value}
        for strategy in Strategy:
            try:
                found = bases(m, c, strategy)
            except RenderError:
                continue
            for image in (found.os_image, found.toolchain_image):
                if image is None:
                    continue
                seen, line, count = used.get(image, (set(), _where(m, where, image, found.cuda_image), 0))
                used[image] = (seen | platforms, line, count + 1)
    return [ImageClaim(ref, tuple(sorted(p)), line, n) for ref, (p, line, n) in sorted(used.items())]


def _where(m: Matrix, where: Where, image: str, cuda_image: CudaImage | None) -> str:
    if cuda_image is not None:
        return where("cuda_image", m.cuda_images.index(cuda_image))
    for i, os_base in enumerate(m.os):
        if image == os_base.image:
            return where("os", i, "image")
        if image in {os_base.python_image.format(python=p) for p in os_base.python_images}:
            return where("os", i, "python_images")
    return where()


def upstream_platforms(client: Distribution, claims: list[ImageClaim]) -> dict[str, Platforms]:
    def one(ref: str) -> Platforms:
        image = parse_ref(ref)
        try:
            return client.platforms(image.repo, image.reference, cache=True)
        except (UpstreamError, PushError) as exc:
            return str(exc)

    refs = [c.ref for c in claims]
    return dict(zip(refs, client.http.map(one, refs), strict=True))


def check_images(claims: list[ImageClaim], found: dict[str, Platforms]) -> list[Finding]:
    findings = []
    for claim in claims:
        result = found[claim.ref]
        subject = f"{claim.ref} ({claim.combinations} combinations)"

        def add(
            status: Status, check: str, claimed: str, upstream: str, claim: ImageClaim = claim, subject: str = subject
        ) -> None:
            findings.append(Finding("images", status, subject, check, claimed, upstream, claim.where))

        if isinstance(result, str):
            add(Status.UNREACHABLE, "tag", claim.ref, result)
            continue
        if result is None:
            add(Status.MISSING, "tag", claim.ref, f"{parse_ref(claim.ref).repo} has no tag {parse_ref(claim.ref).tag}")
            continue
        for platform in claim.platforms:
            if platform in result:
                add(Status.OK, f"{platform} image", claim.ref, result[platform])
            else:
                have = ", ".join(sorted(result)) or "none"
                add(Status.MISSING, f"{platform} image", claim.ref, f"the tag holds no {platform} image (has: {have})")
    return findings


def check_lock(lock: BaseLock, claims: list[ImageClaim], found: dict[str, Platforms]) -> list[Finding]:
    findings = []
    for claim in claims:
        entry, result = lock.get(claim.ref), found.get(claim.ref)
        for platform in claim.platforms:
            subject, check = f"{claim.ref} {platform}", "locked digest"
            locked = entry.platforms.get(platform) if entry else None
            if locked is None:
                upstream = "renders with --locked refuse it: run torchyard matrix lock"
                findings.append(
                    Finding("lock", Status.MISSING, subject, check, "not in matrix.lock", upstream, lock.path)
                )
            elif isinstance(result, str) or result is None:
                why = result or f"the tag {claim.ref} no longer exists"
                status = Status.UNREACHABLE if isinstance(result, str) else Status.MOVED
                findings.append(Finding("lock", status, subject, check, locked, why, lock.path))
            elif result.get(platform) != locked:
                now = result.get(platform, "no such platform")
                upstream = f"the tag now serves {now}: torchyard matrix lock moves it (and rebuilds its images)"
                findings.append(Finding("lock", Status.MOVED, subject, check, locked, upstream, lock.path))
            else:
                findings.append(Finding("lock", Status.OK, subject, check, locked, "unchanged", lock.path))
    return findings


def mirror_image(ref: str, mirror: str | None) -> str:
    """Docker Hub references asked at a mirror (a pull-through cache, or a test registry)."""
    first = ref.split("/", 1)[0]
    on_hub = "/" not in ref or not ("." in first or ":" in first or first == "localhost")
    if mirror is None or not on_hub:
        return ref
    name = ref if "/" in ref.split(":", 1)[0] else f"library/{ref}"
    return f"{mirror}/{name}"
