"""Image references as registries see them: host (docker.io -> registry-1.docker.io), repository
name (library/ for Docker Hub's official images), tag or digest; and platforms (os/arch[/variant])."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from builder.core.errors import UsageError

DOCKER_HUB = "registry-1.docker.io"
_HUB_NAMES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"})
_LOOPBACK = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$")
_NAME = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class RepoRef:
    host: str
    name: str

    @property
    def base(self) -> str:
        # Loopback registries speak plain HTTP, as the engine treats 127.0.0.0/8 as insecure.
        scheme = "http" if _LOOPBACK.match(self.host) else "https"
        return f"{scheme}://{self.host}/v2/{self.name}"

    def __str__(self) -> str:
        return f"{self.host}/{self.name}"


@dataclass(frozen=True)
class ImageRef:
    repo: RepoRef
    tag: str | None
    digest: str | None

    @property
    def reference(self) -> str:
        """What the manifests endpoint takes: the digest when there is one, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        return f"{self.repo}{':' + self.tag if self.tag else ''}{'@' + self.digest if self.digest else ''}"


def parse_repo(repo: str) -> RepoRef:
    """'127.0.0.1:5000/team/img' -> host + name; a repository without a registry host is Docker Hub's."""
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        if first in _HUB_NAMES:
            return RepoRef(DOCKER_HUB, rest if "/" in rest else f"library/{rest}")
        return RepoRef(first, rest)
    name = repo if "/" in repo else f"library/{repo}"
    return RepoRef(DOCKER_HUB, name)


def parse_ref(text: str, what: str = "image") -> ImageRef:
    """'debian:bookworm-slim', 'ghcr.io/o/r:tag@sha256:...', 'host:5000/team/img@sha256:...'."""
    rest, _, digest = text.partition("@")
    name, tag = rest, None
    slash, colon = rest.rfind("/"), rest.rfind(":")
    if colon > slash:
        name, tag = rest[:colon], rest[colon + 1 :]
    repo = parse_repo(name) if name else None
    problems = [
        "no repository" if repo is None else None,
        f"bad tag {tag!r}" if tag is not None and not _TAG.match(tag) else None,
        f"bad digest {digest!r} (sha256:<64 hex>)" if digest and not _DIGEST.match(digest) else None,
        f"bad repository name {repo.name!r}" if repo is not None and not _NAME.match(repo.name) else None,
    ]
    found = [p for p in problems if p]
    if found or repo is None:
        raise UsageError(f"{what} {text!r}: {found[0]}")
    return ImageRef(repo, tag, digest or None)


def normalize_platform(text: str) -> str:
    """'linux/arm64/v8' and 'linux/arm64' are the same platform; 'linux/amd64' stays as it is."""
    parts = text.split("/")
    if len(parts) == 3 and parts[1] == "arm64" and parts[2] == "v8":
        parts = parts[:2]
    return "/".join(parts)


def platform_of(entry: dict[str, Any]) -> str:
    """The platform of an index entry ({"platform": {...}}) or an image config ({"os", "architecture"})."""
    where = entry.get("platform") or entry
    parts = [str(where.get("os", "")), str(where.get("architecture", ""))]
    if where.get("variant"):
        parts.append(str(where["variant"]))
    return normalize_platform("/".join(parts))


def platform_fields(platform: str) -> dict[str, str]:
    """'linux/arm64' -> {"os": "linux", "architecture": "arm64"} (with "variant" where there is one)."""
    parts = normalize_platform(platform).split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise UsageError(f"platform {platform!r}: expected os/architecture[/variant], like linux/arm64")
    fields = {"os": parts[0], "architecture": parts[1]}
    if len(parts) == 3:
        fields["variant"] = parts[2]
    return fields
