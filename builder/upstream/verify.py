"""`torchyard matrix verify`: every fact of matrix.toml that upstream can confirm, checked against it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from packaging.specifiers import SpecifierSet

from builder.core.errors import UsageError
from builder.core.kinds import did_you_mean
from builder.matrix.lock import BaseLock
from builder.matrix.model import Matrix
from builder.net.http import Http
from builder.oci.client import Distribution
from builder.upstream.check_wheels import check_wheels
from builder.upstream.claims import WheelClaim, Where, wheel_claims
from builder.upstream.images import check_images, check_lock, image_claims, mirror_image, upstream_platforms
from builder.upstream.index import PYPI
from builder.upstream.report import Finding, Report, Status

KINDS = ("torch", "companions", "images", "lock")
PYTORCH_INDEX = "https://download.pytorch.org/whl"


@dataclass(frozen=True, kw_only=True)
class VerifyOptions:
    only: frozenset[str] = frozenset(KINDS)
    torch: SpecifierSet | None = None  # torch releases (and their companions) to check
    pypi_url: str = PYPI  # a mirror of PyPI's simple index
    pytorch_index: str = PYTORCH_INDEX  # a mirror of PyTorch's per-variant indexes
    registry_mirror: str | None = None  # a mirror of Docker Hub (host[:port]) to ask instead


def parse_only(values: tuple[str, ...]) -> frozenset[str]:
    """--only torch --only images, or --only torch,images; nothing given: every kind."""
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    for name in names:
        if name not in KINDS:
            raise UsageError(f"--only: {name!r} is not one of {', '.join(KINDS)}{did_you_mean(name, KINDS)}")
    return frozenset(names) or frozenset(KINDS)


def verify(
    m: Matrix, http: Http, registry: Distribution, options: VerifyOptions, lock: BaseLock | None = None
) -> Report:
    start = time.monotonic()
    where = Where(m.path)
    findings: list[Finding] = []
    claims = [_mirrored(c, options) for c in wheel_claims(m, where, options.torch) if c.kind in options.only]
    # Indexes and registries are different hosts: asked at the same time (each with its bounded pool).
    with ThreadPoolExecutor(max_workers=2) as pool:
        images = pool.submit(_images, m, where, registry, options, lock) if options.only & {"images", "lock"} else None
        if claims:
            findings += check_wheels(http, claims)
        findings += images.result() if images is not None else []
    counters = http.counters.as_json()
    if registry.http is not http:
        for key in ("requests", "bytes", "retries", "cache_hits"):
            counters[key] += registry.http.counters.as_json()[key]
    return Report(findings, counters, time.monotonic() - start)


def _images(
    m: Matrix, where: Where, registry: Distribution, options: VerifyOptions, lock: BaseLock | None
) -> list[Finding]:
    claims = image_claims(m, where)
    asked = [replace(c, ref=mirror_image(c.ref, options.registry_mirror)) for c in claims]
    found = upstream_platforms(registry, asked)
    by_tag = {c.ref: found[a.ref] for c, a in zip(claims, asked, strict=True)}
    findings = check_images(claims, by_tag) if "images" in options.only else []
    if "lock" in options.only:
        findings += check_lock(lock, claims, by_tag) if lock is not None else [_no_lock(m)]
    return findings


def _no_lock(m: Matrix) -> Finding:
    return Finding(
        "lock",
        Status.UNCHECKED,
        "matrix.lock",
        "lock file",
        "no lock file next to the matrix",
        "nothing to compare: torchyard matrix lock writes one",
        m.path,
    )


def _mirrored(claim: WheelClaim, options: VerifyOptions) -> WheelClaim:
    url = claim.index_url
    if url == PYPI:
        url = options.pypi_url.rstrip("/")
    elif url.startswith(PYTORCH_INDEX):
        url = options.pytorch_index.rstrip("/") + url[len(PYTORCH_INDEX) :]
    return replace(claim, index_url=url) if url != claim.index_url else claim
