"""What `publish --plan` says of an image a refresh will build (builder/pipeline/refresh.py): with a refresh token,
a publish builds it, compares the new image's package set with the SBOM of the image published under its tag, and
keeps the published image (its digest, nothing pushed) when no package changed, but only when the published image
is this plan's content under another refresh token (its io.torchyard.unrefreshed-content-hash label equals this
plan's): "token only". A published image whose Dockerfile, build arguments or context files differ ("content
too"), or that records no such label ("not recorded": published before torchyard recorded it), is published anew.

The plan cannot know the package set before the build; it says which items the run will compare.
"""

from __future__ import annotations

from collections.abc import Callable

from builder.pipeline.plan import REFRESH_LABEL, Plan
from builder.pipeline.refresh import beyond_token, token_of, unrefreshed_of
from builder.pipeline.registry import Registry

NO_COMPARE, TOKEN_ONLY, CONTENT_TOO, NOT_RECORDED = "", "token only", "content too", "not recorded"


def refresh_kind(plan: Plan, registry: Registry, ref: str) -> tuple[str, str]:
    """For an item the registry does not hold with this plan's content: NO_COMPARE (no refresh token, nothing under
    `ref`, or an index: the run compares nothing), TOKEN_ONLY (the digest the run may keep is returned with it),
    CONTENT_TOO or NOT_RECORDED (published anew: no digest)."""
    if not token_of(plan):
        return NO_COMPARE, ""
    top = registry.read(ref)
    if top is None or top.is_index:  # a first publish; an index has no one SBOM to compare with
        return NO_COMPARE, ""
    published = unrefreshed_of(registry.labels(ref, top=top) or {})
    if not published:
        return NOT_RECORDED, ""
    return (TOKEN_ONLY, top.digest) if published == plan.content_with_token("") else (CONTENT_TOO, "")


def kept_by_refresh(registry: Registry, ref: str, plan: Plan, log: Callable[[str], None]) -> bool:
    """For --aliases-only with a refresh token: the image under `ref` is this plan's content, kept because this
    refresh changed no package (a publish's compare, promote --keep-unchanged), so its content hash carries an
    older token, or none."""
    labels = registry.labels(ref)
    if not labels or not token_of(plan) or beyond_token(ref, labels, plan.content_with_token("")):
        return False
    built = f"refresh {labels[REFRESH_LABEL]}" if labels.get(REFRESH_LABEL) else "no refresh token"
    log(f"KEPT  {ref}: this content (built with {built}), kept: no package changed since")
    return True
