"""Small value types and parsers for versions: packages, CUDA releases, drivers, version specs."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from builder.core.errors import UsageError

_RELEASE_RE = re.compile(r"^\d+(\.\d+){0,3}$", re.ASCII)
_DRIVER_RE = re.compile(r"^(\d{3})(\.\d{1,3}){0,2}$", re.ASCII)
_CUDA_FORM_RE = re.compile(r"^(\d{1,2})(?:\.(\d{1,2}))?(?:\.\d{1,3})?$", re.ASCII)
_TORCH_BUILD_RE = re.compile(r"([0-9]+(?:\.[0-9]+){0,3})\+([A-Za-z0-9_.]+)", re.ASCII)  # 2.5.1+cu124
_SPEC_OPS = ("==", "!=", "<=", ">=", "~=", "<", ">")


MAX_TEXT = 64  # longer than any version or range a person writes: refused, not echoed back


@functools.cache
def release(text: str) -> Version:
    """A plain dotted release (2.5.1, 12.4, 9.1.0.70); no pre-releases, no local parts."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"{len(text)} characters are too long for a version")
    if not _RELEASE_RE.match(text):
        raise ValueError(f"{text!r} is not a dotted version like 2.5.1")
    return Version(text)


def parse_release(text: str, what: str) -> Version:
    try:
        return release(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


def torch_build_parts(text: str) -> tuple[str, str] | None:
    """(release, local part) of a torch version as torch.__version__ prints it (2.5.1+cu124, 2.5.1+cpu); None for
    anything else (a plain release, a range, a value too long to be one)."""
    text = text.strip()
    found = _TORCH_BUILD_RE.fullmatch(text) if len(text) <= MAX_TEXT else None
    return (found[1], found[2]) if found else None


def release_of_build(text: str, what: str, command: str) -> str:
    """A flag that takes a torch release: torch.__version__ (2.16.0+cu130) is refused with the release to give."""
    build = torch_build_parts(text)
    if build is not None:
        pasted = text.strip()
        raise UsageError(
            f"{what}: {pasted!r} is a torch build (torch.__version__); {command} takes a release: {what} {build[0]}"
        )
    return text


def minor_of(version: Version) -> tuple[int, int]:
    release = (*version.release, 0)
    return release[0], release[1]


def minor_str(version: Version) -> str:
    major, minor = minor_of(version)
    return f"{major}.{minor}"


@dataclass(frozen=True, order=True)
class Driver:
    """An NVIDIA driver version; a bare branch ("535") means the newest driver of that branch."""

    parts: tuple[int, ...]
    exact: bool = True
    text: str = field(default="", compare=False)  # as written: keeps leading zeros (580.65.06)

    @property
    def branch(self) -> int:
        return self.parts[0]

    def at_least(self, floor: Driver) -> bool:
        if not self.exact:
            # A bare branch is read as its newest release: same-branch floors are met.
            return self.branch >= floor.branch
        width = max(len(self.parts), len(floor.parts))
        return _pad(self.parts, width) >= _pad(floor.parts, width)

    def __str__(self) -> str:
        return self.text or ".".join(str(p) for p in self.parts)

    def describe(self) -> str:
        return str(self) if self.exact else f"{self} (any {self}.x, read as the newest)"


def meets_floors(drv: Driver, floors: tuple[Driver, ...]) -> bool:
    """Per-branch first drivers: a branch after the last one listed has it; a listed branch from its floor on;
    any other branch does not (a GPU that arrived in 525.x and 535.x is in no 530.x release)."""
    if not floors or drv.branch > floors[-1].branch:
        return True
    same = next((f for f in floors if f.branch == drv.branch), None)
    return same is not None and drv.at_least(same)


def describe_floors(floors: tuple[Driver, ...]) -> str:
    """'>= 570.86.16' or '>= 525.147.05 (525), >= 535.86.05 (535 and later)'."""
    if len(floors) == 1:
        return f">= {floors[0]}"
    parts = [f">= {f} ({f.branch})" for f in floors[:-1]] + [f">= {floors[-1]} ({floors[-1].branch} and later)"]
    return ", ".join(parts)


def _pad(parts: tuple[int, ...], width: int) -> tuple[int, ...]:
    return parts + (0,) * (width - len(parts))


def driver_version(text: str) -> Driver:
    """Driver as nvidia-smi prints it (550.54.15) or a bare branch (550); ValueError if malformed."""
    text = text.strip()
    if not _DRIVER_RE.match(text):
        raise ValueError(f"{text!r} is not an NVIDIA driver version (examples: 535, 550.54.15, 570.124.06)")
    parts = tuple(int(p) for p in text.split("."))
    return Driver(parts=parts, exact=len(parts) > 1, text=text)


def cuda_form(text: str) -> tuple[int, int | None] | None:
    """(major, minor) when `text` has the form of a CUDA version (12, 12.2, 13.0.2: a major of one or two digits,
    where a driver's has three: 535, 550.54.15); None otherwise. Whether it names a CUDA major is the matrix's."""
    found = _CUDA_FORM_RE.match(text.strip())
    if found is None:
        return None
    return int(found[1]), int(found[2]) if found[2] is not None else None


def parse_driver(text: str, what: str = "--driver") -> Driver:
    """A driver given on the command line: one UsageError line naming the flag."""
    try:
        return driver_version(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


def parse_spec(text: str, what: str) -> SpecifierSet:
    """A version spec: '2.5' means 2.5.*, '2.5.1' means exactly that, else a PEP 440 specifier set."""
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise UsageError(f"{what}: {len(text)} characters are too long for a version or range")
    if _RELEASE_RE.match(text):
        return SpecifierSet(f"=={text}.*" if text.count(".") < 2 else f"=={text}")
    if text.startswith(_SPEC_OPS):
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            pass
        else:
            if all(_RELEASE_RE.match(s.version.removesuffix(".*")) for s in spec):
                return spec
    examples = _SPEC_EXAMPLES.get(what, "2.5, 2.5.1, '>=2.4,<2.7'")
    raise UsageError(f"{what}: {text!r} is not a version or version range (examples: {examples})")


_SPEC_EXAMPLES = {"--python": "3.11, '>=3.10,<3.13'", "--cuda": "12, 12.4, cu124, '>=12.4'"}


def is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
