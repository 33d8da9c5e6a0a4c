"""publish --zstd: once the gzip images are pushed, their indexes written and their aliases moved, a zstd
copy of each published tag under `<tag>-zstd` (builder/oci/zstd.py), registry-side.

Which tags: every single-platform image's immutable tag that the run built or found up to date, every
multi-platform index written (its copy is an index of zstd copies; the `<tag>-<arch>` members get none of
their own), and every alias that moved or already named its image (an alias's copy is its image's copy,
written again, nothing recompressed). A copy that fails is reported and fails the run (exit 4); the gzip
tags stay as they are: they passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from builder.core.errors import TorchyardError
from builder.core.kinds import AliasStatus, Status
from builder.core.redact import redact
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref, parse_repo
from builder.oci.zstd import BeforeTag, zstd_copy, zstd_tag
from builder.trust import cosign
from builder.trust.keys import SigningKey

Log = Callable[[str], None]


@dataclass
class ZstdResult:
    tag: str  # the gzip tag copied
    status: str  # written | unchanged | failed
    target: str = ""  # <tag>-zstd
    digest: str = ""
    reason: str = ""
    gzip_bytes: int = 0
    zstd_bytes: int = 0
    signed: list[str] = field(default_factory=list)  # the copy's manifests signed in this run (a key was given)


@dataclass(frozen=True)
class Published:
    """What the run left in the registry: tags in the order their copies are written (aliases last)."""

    images: tuple[str, ...]  # immutable tags of single-platform images and of indexes
    aliases: tuple[tuple[str, str], ...]  # (alias, the immutable tag it names)


def write_zstd_copies(
    client: Distribution, repo: str, published: Published, log: Log, key: SigningKey | None = None
) -> list[ZstdResult]:
    """With `key`, each copy's manifests are signed before its tag is written, as the gzip images were."""
    signs = cosign.signer(client, parse_repo(repo), key) if key is not None else None
    results = [_copy(client, repo, tag, (), log, signs) for tag in published.images]
    done = {r.tag for r in results if r.status != "failed"}
    for alias, owner in published.aliases:
        if owner not in done:
            results.append(ZstdResult(alias, "failed", reason=f"the zstd copy of {owner} was not written"))
            continue
        results.append(_copy(client, repo, alias, (zstd_tag(owner),), log, signs))
    return results


def _copy(
    client: Distribution, repo: str, tag: str, reuse: tuple[str, ...], log: Log, signs: BeforeTag | None
) -> ZstdResult:
    try:
        copy = zstd_copy(client, parse_ref(f"{repo}:{tag}"), reuse=reuse, before_tag=signs)
    except TorchyardError as exc:
        reason = redact(str(exc))
        log(f"FAIL  zstd copy of {repo}:{tag}: {reason}")
        return ZstdResult(tag, "failed", reason=reason)
    log(f"ZSTD  {copy.summary()}")
    status = "unchanged" if copy.unchanged else "written"
    return ZstdResult(tag, status, copy.target, copy.digest, "", copy.gzip_bytes, copy.zstd_bytes, copy.signed)


def published_tags(
    items: list[tuple[str, Status, bool]],
    indexes: list[tuple[str, AliasStatus]],
    aliases: list[tuple[str, AliasStatus, str]],
) -> Published:
    """items: (ref, status, member of a multi-platform image); indexes: (tag, status); aliases: (alias, status,
    the ref or tag it names)."""
    images = [ref.rsplit(":", 1)[1] for ref, status, member in items if status in _PASSED and ref and not member]
    images += [tag for tag, status in indexes if status is not AliasStatus.HELD]
    moved = [(alias, target.rsplit(":", 1)[-1]) for alias, status, target in aliases if status is not AliasStatus.HELD]
    return Published(tuple(images), tuple(moved))


_PASSED = (Status.BUILT, Status.SKIPPED)
