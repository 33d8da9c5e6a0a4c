"""Image tags: small pure functions, computed into the plan first and checked against the built image.

Scheme (docs/tags.md):
  immutable  <torch>-cuda<X.Y>-cudnn<N>-py<P>-<os>-<flavor>[-cuda-base][-<archs>][-x<extras id>]
             2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime, 2.14.1-cpu-py3.11-debian12-devel
  aliases    <torch X.Y>-cuda<X.Y>[-py<P>-<os>]-<flavor>[-cuda-base][-<archs>][-x<id>]
             (only on the newest patch of X.Y with that variant and Python: it moves forward, never back)
             latest-<flavor>   (only for the newest torch, its PyPI default variant, on the default OS/Python)
  platform   linux/amd64 adds nothing; another platform's tags end in -<arch> (-arm64). A multi-platform
             publish writes an image index under the platform-free tags and tags each platform's image
             <immutable>-<arch> (-amd64 too), so every image stays addressable (docs/tags.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from builder.core.archs import Arch
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.core.names import check_tag
from builder.core.versions import minor_str
from builder.matrix.model import Matrix, TorchRelease
from builder.render.options import RenderOptions
from builder.resolve.combos import Combination


@dataclass(frozen=True)
class ImageTags:
    immutable: str
    aliases: tuple[str, ...]

    def all(self) -> tuple[str, ...]:
        return (self.immutable, *self.aliases)


def _stack(c: Combination) -> str:
    v = c.variant
    if v.cuda is None:
        return "cpu"
    cudnn = f"-cudnn{v.cudnn.major}" if v.cudnn else ""
    return f"cuda{minor_str(v.cuda)}{cudnn}"


def suffix(flavor: Flavor, strategy: Strategy, archs: tuple[Arch, ...], extras: str | None = None) -> str:
    parts = [flavor.value]
    if strategy is not Strategy.WHEELS:
        parts.append(strategy.value)
    if archs:
        parts.append("-".join(f"sm{a.cmake}" for a in archs))
    if extras:
        parts.append(f"x{extras}")
    return "-".join(parts)


def platform_suffix(platform: Platform) -> str:
    """'' for linux/amd64 (the tags of every image before arm64 existed), else '-<arch>' (-arm64)."""
    return "" if platform is Platform.AMD64 else f"-{platform.arch}"


def index_tag(tag: str, platform: Platform) -> str:
    """A platform's tag without its platform part: 2.5.1-cpu-py3.11-debian12-runtime-arm64 -> ...-runtime."""
    return tag.removesuffix(platform_suffix(platform))


def member_tag(tag: str, platform: Platform) -> str:
    """The tag of one platform's image inside a multi-platform set: <index tag>-<arch> (-amd64 too)."""
    return f"{index_tag(tag, platform)}-{platform.arch}"


def extras_id(options: RenderOptions) -> str | None:
    """A short id of what the user added (packages, requirements, user, labels, extensions), so images
    built with different additions never share an immutable tag; None when nothing was added."""
    added = {
        "pip": sorted(options.extra_pip),
        "requirements": options.requirements.fingerprint() if options.requirements else None,
        "user": options.user,
        "labels": sorted(options.labels),
        "extensions": sorted((e.name, e.kind, e.spec if e.kind == "pip" else "") for e in options.extensions),
    }
    if not any(added.values()):
        return None
    return hashlib.sha256(json.dumps(added, sort_keys=True).encode()).hexdigest()[:8]


def default_os_python(m: Matrix) -> tuple[str, str]:
    """The first OS base of the matrix with its own Python: the default platform of aliases."""
    first = m.os[0]
    return first.name, first.system_python


def _newest_patch(m: Matrix, c: Combination) -> bool:
    """No later release of this torch X.Y offers the same variant for the same Python on the same platform."""
    v = c.torch.version
    return not any(
        (t.version.major, t.version.minor) == (v.major, v.minor) and t.version > v and _offers(t, c) for t in m.torch
    )


def _offers(release: TorchRelease, c: Combination) -> bool:
    variant = release.variant(c.variant.name)
    wheels = release.on(c.platform)
    return (
        variant is not None
        and variant.build(c.platform) is not None
        and wheels is not None
        and c.python in wheels.python
    )


def image_tags(
    m: Matrix, c: Combination, flavor: Flavor, strategy: Strategy, archs: tuple[Arch, ...], extras: str | None = None
) -> ImageTags:
    suffix_ = suffix(flavor, strategy, archs, extras) + platform_suffix(c.platform)
    immutable = f"{c.torch.version}-{_stack(c)}-py{c.python}-{c.os.name}-{suffix_}"
    platform = "" if (c.os.name, c.python) == default_os_python(m) else f"-py{c.python}-{c.os.name}"
    cuda = f"cuda{minor_str(c.variant.cuda)}" if c.variant.cuda else "cpu"
    minor = f"{c.torch.version.major}.{c.torch.version.minor}"
    aliases = [f"{minor}-{cuda}{platform}-{suffix_}"] if _newest_patch(m, c) else []
    newest = max(t.version for t in m.torch)
    if not platform and c.torch.version == newest and c.is_pypi_default:
        aliases.append(f"latest-{suffix_}")
    for tag in (immutable, *aliases):
        problem = check_tag(tag)
        if problem:  # many --arch make a long suffix: refused here, before a build, not after it
            raise RenderError(f"the tag {tag!r} is {problem}: give fewer --arch")
    return ImageTags(immutable, tuple(aliases))


def project_repository(repo: str, name: str) -> str:
    """The project image's repository: the project's name under --repo (torchyard/my-model; with
    --repo ghcr.io/team, ghcr.io/team/my-model)."""
    return f"{repo}/{name}"


def project_tag(base_immutable: str, content_id: str) -> str:
    """The base image's immutable tag plus the project's content id (its first 12 hex digits):
    2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-p0123456789ab."""
    tag = f"{base_immutable}-p{content_id[:12]}"
    problem = check_tag(tag)
    if problem:
        raise RenderError(f"the project's tag {tag!r} is {problem}: give fewer --arch")
    return tag
