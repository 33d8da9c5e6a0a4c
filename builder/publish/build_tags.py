"""Build tags (issue 44 item 2): each image a publish pushes also gets a tag that is never rewritten,
`<tag>-<YYYYMMDD>` (the UTC day of the publish; `.2`, `.3` ... for a later build of the same tag that day). The
per-combination tag and the aliases float over these: a rollback, a pinned deployment or a registry with tag
immutability (ECR, Harbor) uses the build tag. Written registry-side from the pushed manifest, byte for byte (the
signature and attestations of that digest hold for it). A build tag that names another digest is never touched."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from builder.core.errors import PushError, TorchyardError
from builder.core.kinds import AliasStatus, Status
from builder.core.redact import redact
from builder.oci.client import Manifest
from builder.pipeline.registry import Registry
from builder.publish.report import Report

MAX_PER_DAY = 99
MAX_TAG = 128  # the OCI distribution spec's limit on a tag's length


def today(epoch: float | None = None) -> str:
    """The UTC day a build tag carries, YYYYMMDD."""
    return time.strftime("%Y%m%d", time.gmtime(time.time() if epoch is None else epoch))


def build_tag(registry: Registry, ref: str, day: str) -> str:
    """Put the manifest under repo:tag also under its first free build tag of `day`, or find the one of that day that
    already names it (a rerun); returns that ref. PushError when the tag is not in the registry, the name would be
    too long, or the day's build tags are all taken."""
    will = registry.read(ref)
    if will is None:
        raise PushError(f"{ref} is not in the registry: no build tag written for it")
    return build_tag_of(registry, ref, will, day)


def build_tag_of(registry: Registry, ref: str, will: Manifest, day: str) -> str:
    """build_tag for a manifest already read (promote: before repo:tag names it, so a failed write leaves the tag
    where it was and a rerun writes both)."""
    repo, tag = ref.rsplit(":", 1)
    for n in range(1, MAX_PER_DAY + 1):
        candidate = f"{tag}-{day}" + (f".{n}" if n > 1 else "")
        if len(candidate) > MAX_TAG:
            raise PushError(f"{candidate}: a build tag longer than {MAX_TAG} characters (the registry's limit)")
        held = registry.read(f"{repo}:{candidate}")
        if held is None:
            registry.put(f"{repo}:{candidate}", will)
        if held is None or held.digest == will.digest:
            return f"{repo}:{candidate}"
    raise PushError(f"{tag}: {MAX_PER_DAY} builds on {day} already have build tags; none is left")


def write_build_tags(
    registry: Registry, refs: Iterable[str], day: str, log: Callable[[str], None]
) -> tuple[dict[str, str], dict[str, str]]:
    """A build tag for each ref pushed by this run: ({ref: build ref}, {ref: why it has none})."""
    written: dict[str, str] = {}
    failed: dict[str, str] = {}
    for ref in refs:
        try:
            written[ref] = build_tag(registry, ref, day)
        except TorchyardError as exc:
            failed[ref] = redact(str(exc))
            log(f"FAIL  build tag of {ref}: {failed[ref]}")
            continue
        log(f"TAG   {written[ref]} (never rewritten) = {ref}")
    return written, failed


def stamp(report: Report, repo: str, registry: Registry, day: str, log: Callable[[str], None]) -> None:
    """Build tags for what this run pushed: each built image and each index it wrote; recorded on the report
    (items' and indexes' build_tag; report.untagged, which fails the run, for any it could not write)."""
    built = {i.ref: i for i in report.items if i.status == Status.BUILT and i.ref}
    indexes = {f"{repo}:{i.tag}": i for i in report.indexes if i.status is AliasStatus.MOVED}
    written, report.untagged = write_build_tags(registry, [*built, *indexes], day, log)
    for ref, build_ref in written.items():
        (built.get(ref) or indexes[ref]).build_tag = build_ref
