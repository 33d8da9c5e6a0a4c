"""Image names, checked once and early by Docker's reference grammar (distribution/reference), so a name that
Docker, a registry or a shell would read differently never reaches a Dockerfile, a printed command or a build.

    reference  := name [":" tag] ["@" digest]
    name       := [domain "/"] path-component ("/" path-component)*      (at most 255 characters)
    domain     := host [":" port]        (a first component with ".", ":" or "localhost")
    path-component := [a-z0-9]+ ((\\.|_|__|-+) [a-z0-9]+)*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex      (sha256: 64 hex digits)
"""

from __future__ import annotations

import re

from builder.core.errors import UsageError

MAX_NAME = 255
MAX_TAG = 128
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*", re.ASCII)
_HOST = re.compile(
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])"
    r"(?::[0-9]{1,5})?",
    re.ASCII,
)
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}", re.ASCII)
_IMAGE_ID = re.compile(r"(?:sha256:)?[0-9a-f]{12,64}", re.ASCII)


def check_repository(value: str, flag: str = "--repo") -> str:
    """A repository (no tag, no digest): torchyard, 127.0.0.1:5000/team/torch, ghcr.io/org/torch."""
    problem = _name_problem(value)
    if problem:
        raise UsageError(f"{flag}: {value!r} is not an image repository: {problem} (example: ghcr.io/org/torch)")
    return value


def check_mirror(value: str, flag: str = "--registry-mirror") -> str:
    """A registry (host[:port]) and an optional path under which Docker Hub's images are found:
    mirror.corp.example, 127.0.0.1:5000/torchyard-base."""
    mirror = value.rstrip("/")  # mirror.example/hub/ is mirror.example/hub
    host = mirror.split("/", 1)[0]
    problem = _name_problem(f"{mirror}/library/debian") if mirror else "it is empty"
    if problem is None and not ("." in host or ":" in host or host == "localhost"):
        problem = f"{host!r} is not a registry host (it needs a '.', a :port, or localhost)"
    if problem:
        raise UsageError(f"{flag}: {value!r} is not a registry mirror: {problem} (example: mirror.corp.example/hub)")
    return mirror


def check_reference(value: str, flag: str = "IMAGE") -> str:
    """An image to run or read: name[:tag][@digest], or an image ID (sha256:..., or 12+ hex digits)."""
    if _IMAGE_ID.fullmatch(value):
        return value
    name, digest = value.split("@", 1) if "@" in value else (value, None)
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    problem = _name_problem(name)
    if problem is None and tag is not None and not TAG.fullmatch(tag):
        problem = (
            f"the tag {tag!r} is not one Docker accepts ([A-Za-z0-9_.-], at most {MAX_TAG}, not starting with . or -)"
        )
    if problem is None and digest is not None and not _DIGEST.fullmatch(digest):
        problem = f"the digest {digest!r} is not sha256:<64 hex digits>"
    if problem:
        raise UsageError(f"{flag}: {value!r} is not an image reference: {problem} (example: pytorch/pytorch:2.5.1)")
    return value


def check_tag(tag: str) -> str | None:
    """Why a tag is not one Docker accepts, or None."""
    if len(tag) > MAX_TAG:
        return f"{len(tag)} characters, more than Docker's {MAX_TAG}"
    return None if TAG.fullmatch(tag) else "only [A-Za-z0-9_.-], not starting with '.' or '-'"


def _name_problem(value: str) -> str | None:
    checks = (
        (not value, "it is empty"),
        (any(c.isspace() for c in value), "it contains whitespace"),
        ("://" in value, "it has a scheme; give host/path without https://"),
        (len(value) > MAX_NAME, f"{len(value)} characters, more than {MAX_NAME}"),
    )
    problem = next((message for failed, message in checks if failed), None)
    return problem or _parts_problem(value)


def _parts_problem(value: str) -> str | None:
    parts = value.split("/")
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        if not _HOST.fullmatch(first):
            return f"{first!r} is not a registry host[:port]"
        parts = parts[1:]
    for part in parts:
        if not _COMPONENT.fullmatch(part):
            return (
                f"the path component {part!r} is not lower-case letters and digits joined by '.', '_' or '-'"
                if part
                else "it has an empty path component"
            )
    return None
