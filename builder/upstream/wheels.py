"""Wheel file names and metadata: which wheel serves a Python on a platform, and the dependency pins a
wheel's METADATA declares for a Linux machine."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from builder.upstream.index import IndexFile

MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


@dataclass(frozen=True)
class Wheel:
    file: IndexFile
    version: Version
    tags: frozenset[Tag]

    @property
    def platforms(self) -> frozenset[str]:
        return frozenset(t.platform for t in self.tags)


def by_version(files: Iterable[IndexFile], project: str) -> dict[Version, list[Wheel]]:
    """The project's wheels by exact version (a local version label is part of it: 2.5.1+cu124)."""
    found: dict[Version, list[Wheel]] = {}
    for f in files:
        if not f.filename.endswith(".whl"):
            continue
        try:
            name, version, _, tags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            continue
        if name == canonicalize_name(project):
            found.setdefault(version, []).append(Wheel(f, version, frozenset(tags)))
    return found


def wheels(files: Iterable[IndexFile], project: str, version: Version) -> list[Wheel]:
    """The wheels of exactly this version."""
    return by_version(files, project).get(version, [])


def cp(python: str) -> str:
    return "cp" + python.replace(".", "")


def exact(candidates: Iterable[Wheel], python: str, platform_tag: str) -> Wheel | None:
    """The wheel tagged cpXY-cpXY(m)-<platform_tag> (free-threaded cpXYt builds are not this Python)."""
    wanted = {Tag(cp(python), abi, platform_tag) for abi in (cp(python), cp(python) + "m")}
    return next((wheel for wheel in candidates if wheel.tags & wanted), None)


def for_python(candidates: Iterable[Wheel], python: str, platform: str) -> list[Wheel]:
    """The wheels of this CPython on this Linux platform, whatever their platform tag (to name a rename)."""
    interpreter = cp(python)
    machine = MACHINES.get(platform, platform.rsplit("/", 1)[-1])
    return [
        w
        for w in candidates
        if any(
            t.interpreter == interpreter and t.abi in (interpreter, interpreter + "m") and t.platform.endswith(machine)
            for t in w.tags
        )
    ]


def installable(candidates: Iterable[Wheel], python: str, platform: str, glibc: Version) -> Wheel | None:
    """A wheel pip installs for CPython `python` on Linux `platform` with this glibc (any compatible tag:
    cpXY, abi3, py3-none; manylinux up to the glibc)."""
    supported = _supported(python, platform, glibc)
    return next((w for w in candidates if w.tags & supported), None)


@functools.cache
def _supported(python: str, platform: str, glibc: Version) -> frozenset[Tag]:
    major, minor = (int(p) for p in python.split(".")[:2])
    platforms = linux_platforms(platform, glibc)
    supported = set(cpython_tags((major, minor), platforms=platforms))
    supported |= set(compatible_tags((major, minor), interpreter=cp(python), platforms=platforms))
    return frozenset(supported)


def linux_platforms(platform: str, glibc: Version) -> list[str]:
    machine = MACHINES.get(platform, platform.rsplit("/", 1)[-1])
    top = glibc.release[1] if len(glibc.release) > 1 else 0
    tags = [f"manylinux_2_{m}_{machine}" for m in range(top, 4, -1)]
    tags += [f"{name}_{machine}" for name, floor in _LEGACY.items() if floor[1] <= top]
    return [*tags, f"linux_{machine}"]


def glibc_floor(platform_tag: str) -> Version | None:
    """manylinux_2_28_x86_64 -> 2.28; manylinux2014_x86_64 -> 2.17; linux_x86_64 -> None."""
    head = platform_tag.split("_")
    if head[0] == "manylinux" and len(head) > 2 and head[1].isdigit() and head[2].isdigit():
        return Version(f"{head[1]}.{head[2]}")
    legacy = _LEGACY.get(head[0])
    return Version(f"{legacy[0]}.{legacy[1]}") if legacy else None


# --- metadata ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metadata:
    name: str
    version: str
    requires_python: SpecifierSet | None
    requires_dist: tuple[str, ...]  # as written; parsed on demand (packaging's parser is slow)

    @property
    def requires(self) -> tuple[Requirement, ...]:
        parsed = (_parsed(line) for line in self.requires_dist)
        return tuple(r for r in parsed if r is not None)


def parse_metadata(text: str) -> Metadata:
    """The core metadata fields verify reads (email-header format, PEP 566); ValueError if unreadable."""
    headers = HeaderParser().parsestr(text.split("\n\n", 1)[0], headersonly=True)  # the body: the description
    if not headers.get("Name") or not headers.get("Version"):
        raise ValueError("METADATA without Name or Version")
    python = headers.get("Requires-Python")
    return Metadata(
        name=str(headers["Name"]),
        version=str(headers["Version"]),
        requires_python=SpecifierSet(python) if python else None,
        requires_dist=tuple(str(line) for line in headers.get_all("Requires-Dist") or []),
    )


@functools.lru_cache(maxsize=4096)
def _parsed(line: str) -> Requirement | None:
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None  # a line no installer could use either


_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def environment(python: str, platform: str) -> dict[str, str]:
    """Marker values for CPython `python` on Linux `platform`, no extras asked for."""
    return {
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": MACHINES.get(platform, platform.rsplit("/", 1)[-1]),
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def pins(
    metadata: Metadata, python: str, platform: str, names: re.Pattern[str] | None = None
) -> dict[str, Requirement]:
    """The requirements that apply on this Python and platform, by canonical name (only those whose name
    matches `names`, when given: the rest are not even parsed)."""
    env = environment(python, platform)
    found: dict[str, Requirement] = {}
    for line in metadata.requires_dist:
        head = _NAME.match(line)
        if names is not None and (head is None or not names.fullmatch(canonicalize_name(head[1]))):
            continue
        requirement = _parsed(line)
        if requirement is None:
            continue
        marker: Marker | None = requirement.marker
        if marker is None or marker.evaluate(env):
            found[canonicalize_name(requirement.name)] = requirement
    return found


def pin_text(requirement: Requirement) -> str:
    """'cuda-toolkit[cublas,...]==13.0.3; platform_system == "Linux"' -> 'cuda-toolkit==13.0.3'."""
    return f"{canonicalize_name(requirement.name)}{requirement.specifier}"


def same_spec(a: SpecifierSet, b: SpecifierSet) -> bool:
    """>=2.14.0 and >=2.14 are the same requirement; the order of clauses does not matter."""
    return _normal(a) == _normal(b)


def _normal(spec: SpecifierSet) -> frozenset[tuple[str, object]]:
    return frozenset((s.operator, s.version if s.version.endswith(".*") else Version(s.version)) for s in spec)
