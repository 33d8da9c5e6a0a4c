"""Multi-platform images: one image per platform, joined by an OCI image index under the platform-free tags.

Tags (docs/tags.md): each platform's image is pushed as `<immutable>-<arch>` (-amd64, -arm64: every image
stays addressable); the index takes the platform-free immutable tag, then the aliases all platforms share.
The index is written only when every platform's image passed its smoke suite; a platform that failed holds
the tag where it was, and the result says why. The index carries the content identity of the set (a hash
over each platform's content hash) as an annotation, so an unchanged index is recognised by reading one
manifest: nothing is pulled, nothing is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from builder.core.errors import BuildError, PushError, TorchyardError
from builder.core.kinds import AliasStatus, Platform
from builder.core.redact import redact
from builder.engine import Engine, split_ref
from builder.oci.refs import parse_repo
from builder.pipeline.pipeline import BuildSettings, Outcome, build
from builder.pipeline.plan import Plan
from builder.pipeline.refresh import lists_exactly
from builder.pipeline.registry import Registry
from builder.render.tags import ImageTags, index_tag, member_tag
from builder.trust import cosign
from builder.trust.attest import signing_key_of
from builder.trust.keys import SigningKey

Log = Callable[[str], None]


def index_tags(members: Mapping[Platform, ImageTags]) -> ImageTags:
    """The index's tags: the platform-free immutable tag, and the aliases every platform carries (an alias one
    platform's image does not carry, e.g. a newer patch elsewhere, is not the set's)."""
    immutables = {index_tag(t.immutable, p) for p, t in members.items()}
    if len(immutables) != 1:
        raise TorchyardError(f"the platforms' images do not describe one image: {', '.join(sorted(immutables))}")
    stripped = [[index_tag(a, p) for a in t.aliases] for p, t in members.items()]
    common = [a for a in stripped[0] if all(a in other for other in stripped[1:])]
    return ImageTags(immutables.pop(), tuple(common))


def combined_hash(hashes: Mapping[Platform, str]) -> str:
    """The content identity of a multi-platform image: each platform's content hash, in platform order."""
    text = "".join(f"{p.value}={hashes[p]}\n" for p in sorted(hashes, key=list(Platform).index))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class IndexResult:
    tag: str  # the platform-free immutable tag
    status: AliasStatus  # moved (written) | unchanged | held
    digest: str = ""
    reason: str = ""
    members: dict[str, str] | None = None  # platform -> image manifest digest
    aliases: list[str] | None = None  # the aliases written (or already naming this index)
    build_tag: str = ""  # the never-rewritten tag this run gave the index (builder/publish/build_tags.py)


def publish_index(
    registry: Registry,
    repo: str,
    tags: ImageTags,
    members: Mapping[Platform, str],
    content_hash: str,
    log: Log,
    failed: Mapping[Platform, str] | None = None,
    *,
    key: SigningKey | None = None,
) -> IndexResult:
    """Write the index of `members` ({platform: member tag}) under the immutable tag, sign it with `key` (as
    each platform's image is signed: builder/trust/cosign.py), then write it under each alias. A failed
    platform holds every tag of the set (nothing is written); refs already naming an index with this content
    are left alone, but an unsigned one is signed (a rerun finishes what a refused signature upload left)."""
    ref = f"{repo}:{tags.immutable}"
    if failed:
        reason = "; ".join(f"{p.value} failed: {why}" for p, why in failed.items())
        log(redact(f"HOLD  {ref}: {reason}"))
        return IndexResult(tags.immutable, AliasStatus.HELD, reason=redact(reason))
    refs = [ref, *(f"{repo}:{alias}" for alias in tags.aliases)]
    try:
        current = [r for r in refs if registry.index_content(r) == content_hash]
        if len(current) == len(refs):
            _sign_index(registry, ref, key, log)
            log(f"SKIP  {ref}: the index and its aliases already name this content")
            return IndexResult(tags.immutable, AliasStatus.UNCHANGED, aliases=list(tags.aliases))
        digests = _member_digests(registry, repo, members)
        if not current and all(lists_exactly(registry, r, digests) for r in refs):  # a refresh kept every image
            _sign_index(registry, ref, key, log)
            log(f"SKIP  {ref}: the index and its aliases already list these images (a refresh changed none)")
            return IndexResult(tags.immutable, AliasStatus.UNCHANGED, members=digests, aliases=list(tags.aliases))
        written = ""
        for target in refs:
            if target not in current:
                written = registry.put_index(target, digests, content_hash)
                log(f"INDEX {target} -> {', '.join(p for p in digests)} ({written})")
            if target == ref:  # signed before any alias names it
                _sign_index(registry, ref, key, log)
    except TorchyardError as exc:
        log(redact(f"FAIL  index {ref}: {exc}"))
        return IndexResult(tags.immutable, AliasStatus.HELD, reason=redact(str(exc)))
    return IndexResult(tags.immutable, AliasStatus.MOVED, written, members=digests, aliases=list(tags.aliases))


def _sign_index(registry: Registry, ref: str, key: SigningKey | None, log: Log) -> None:
    """A cosign signature of the index's own digest: cosign and admission controllers built on it verify the
    digest the tag names, which for a multi-platform tag is the index's. (skopeo / podman policies check each
    platform's image instead: docs/trust.md.)"""
    if key is None:
        return
    repo_text, tag = split_ref(ref)
    repo = parse_repo(repo_text)
    index = registry.client.manifest(repo, tag)
    if index is None or not index.is_index:
        raise PushError(f"{ref}: the registry holds no index under this tag to sign")
    if cosign.sign(registry.client, repo, index.digest, key):
        log(f"SIGN  {ref} ({index.digest})")


def _member_digests(registry: Registry, repo: str, members: Mapping[Platform, str]) -> dict[str, str]:
    found = {}
    for platform, tag in members.items():
        digest = registry.platform_digest(f"{repo}:{tag}", platform.value)
        if digest is None:
            raise TorchyardError(f"{repo}:{tag} holds no {platform.value} image: push it before its index")
        found[platform.value] = digest
    return found


@dataclass
class PlatformsRun:
    """`build --platform A,B`: each platform's outcomes (or why it failed) and the index of each flavor."""

    outcomes: dict[Platform, list[Outcome]]
    failed: dict[Platform, str]
    indexes: list[IndexResult]

    @property
    def ok(self) -> bool:
        return not self.failed and all(i.status is not AliasStatus.HELD for i in self.indexes)


def build_platforms(
    engine: Engine, plans: tuple[Plan, ...], settings: BuildSettings, log: Log, registry: Registry | None = None
) -> PlatformsRun:
    """Build, verify and smoke-test each platform's image (tagged <immutable>-<arch>, pushed with --push); a
    platform that fails does not stop the others. With --push, each flavor's index is written last, and only
    when every platform passed (multiplatform.publish_index)."""
    registry = registry or Registry(settings.auth)
    run = PlatformsRun({}, {}, [])
    for plan in plans:
        platform = plan.combination.platform
        member = replace(settings, member=True, out_dir=settings.out_dir / platform.arch)

        def prefixed(line: str, arch: str = platform.arch) -> None:
            log(f"[{arch}] {line}")

        try:
            run.outcomes[platform] = build(engine, plan, member, prefixed, registry)
        except BuildError as exc:  # the build, its checks or its smoke suite: this platform only
            run.failed[platform] = str(exc)
            prefixed(redact(f"FAILED: {exc}").splitlines()[0])
    if not settings.push:
        log("no --push: each platform's image is tagged <tag>-<arch> here; an image index exists only in a registry")
        return run
    for flavor in settings.flavors:
        tags = index_tags({p.combination.platform: p.target(flavor).tags for p in plans})
        members = {p.combination.platform: member_tag(p.target(flavor).tags.immutable, p.combination.platform)
                   for p in plans}  # fmt: skip
        content = combined_hash({p.combination.platform: p.content_hash for p in plans})
        shown = tags if settings.aliases else ImageTags(tags.immutable, ())
        key = signing_key_of(settings.trust)
        run.indexes.append(publish_index(registry, settings.repo, shown, members, content, log, run.failed, key=key))
    return run
