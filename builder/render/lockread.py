"""What uv.lock (builder/render/uvlock.py) and PEP 751's pylock.toml (builder/render/pylock.py) have in common,
read into the Requirements a hashed requirements file gives: the file opened as TOML with its lines located, each
package pinned `name==version` (or `name @ URL`) with every hash of its files, and the split between the packages
the install gets and those the image already holds.

The image's own (torch, torchvision, torchaudio, triton, cuda-toolkit, every nvidia-* wheel) are checked against
its pins where the image pins them (builder/render/pins.py) and never reinstalled: the base installed them with
torch (and a lock that agrees on torch agrees on what torch pins exactly).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from packaging.requirements import InvalidRequirement, Requirement

from builder.core import safety
from builder.core.errors import UsageError
from builder.core.files import read_text
from builder.matrix.locate import KeyPath, Locator
from builder.matrix.toml_text import TomlSyntaxError, parse_toml
from builder.render.network import Indexes
from builder.render.pins import canonical
from builder.render.reqtypes import Entry, Kind, Requirements

HASH = re.compile(r"(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})")
PYPI = ("https://pypi.org/simple", "https://pypi.org/simple/")
BASE_NAMES = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "cuda-toolkit"})
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def is_base(name: str) -> bool:
    """A distribution the image's venv holds with torch: checked against the pins, not installed again."""
    name = canonical(name)
    return name in BASE_NAMES or name.startswith("nvidia-")


@dataclass(frozen=True)
class LockFile:
    """An open lock: the name messages give it (as the user gave it), its document, its lines."""

    shown: str
    doc: dict[str, Any]
    locator: Locator

    def where(self, path: KeyPath) -> str:
        line = self.locator.line_of(path)
        return f"{self.shown}:{line}" if line else self.shown

    def fail(self, path: KeyPath, message: str) -> NoReturn:
        raise UsageError(f"--requirements {self.where(path)}: {message}")


def open_lock(path: Path, shown: str, what: str) -> LockFile:
    """The file as TOML; a syntax error is one line at its line."""
    text = read_text(path, "--requirements")
    try:
        doc = parse_toml(text)
    except TomlSyntaxError as exc:
        found = _AT_LINE.search(str(exc))
        where = f"{shown}:{found.group(1)}" if found else shown
        raise UsageError(f"--requirements {where}: not {what}: {exc}") from None
    return LockFile(shown, doc, Locator(text))


@dataclass(frozen=True, kw_only=True)
class Package:
    """One locked distribution, read: what its requirement line is made of."""

    where: str  # uv.lock:12
    name: str
    version: str
    marker: str | None
    hashes: tuple[str, ...]
    url: str | None = None  # a direct URL (an archive): `name @ URL`
    index: str | None = None  # the index it came from (its simple API root)


def entry(p: Package) -> Entry:
    """`name==version; marker` (or `name @ URL; marker`) with its hashes, checked as PEP 508 reads it."""
    head = f"{p.name} @ {p.url}" if p.url else f"{p.name}=={p.version}"
    line = f"{head}; {p.marker}" if p.marker else head
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in line):
        raise UsageError(f"--requirements {p.where}: package {p.name}: {line[:120]!r} has a control character")
    try:
        Requirement(line)
    except InvalidRequirement as exc:
        why = str(exc).splitlines()[0]
        raise UsageError(
            f"--requirements {p.where}: package {p.name}: {line[:120]!r} is no requirement ({why})"
        ) from None
    if not p.hashes:
        raise UsageError(f"--requirements {p.where}: package {p.name}: no hashed file (a wheel or sdist with a hash)")
    specifier = "" if p.url else f"=={p.version}"
    kind: Kind = "url" if p.url else "index"
    return Entry(where=p.where, line=line, name=canonical(p.name), specifier=specifier, marker=p.marker,
                 hashes=p.hashes, kind=kind)  # fmt: skip


def checked_hash(lock: LockFile, path: KeyPath, name: str, value: object) -> str:
    if not isinstance(value, str) or not HASH.fullmatch(value):
        lock.fail(
            path, f"package {name}: hash {str(value)[:80]!r}: expected sha256:, sha384: or sha512: and hex digits"
        )
    return value


def checked_url(lock: LockFile, path: KeyPath, name: str, value: object, *, index: bool = False) -> str:
    """An https (or http) URL; without credentials unless it is an index's (which goes into the pipconf secret):
    a file's URL is written into the requirements file the image keeps."""
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        lock.fail(path, f"package {name}: {safety.redact(str(value))[:80]!r}: expected an https URL")
    if not index and safety.redact(value) != value:
        lock.fail(path, f"package {name}: {safety.redact(value)!r}: credentials in a URL the image would keep")
    return value


def requirements(lock: LockFile, packages: Iterable[Package]) -> Requirements:
    """The packages as a hashed requirements set: the image's own apart (checked, not installed), the indexes
    other than PyPI added as extra indexes (the build's own index stays first)."""
    found = sorted(packages, key=lambda p: canonical(p.name))  # stable: the lock's order within a name
    install = [p for p in found if not is_base(p.name)]
    extra = sorted({p.index for p in install if p.index and p.index not in PYPI})
    urls = tuple(safety.check_url(f"--requirements {lock.shown}", u, "https://pypi.example.com/simple") for u in extra)
    return Requirements(
        path=lock.shown,
        entries=tuple(entry(p) for p in install),
        base=tuple(entry(p) for p in found if is_base(p.name)),
        indexes=Indexes(where=lock.shown, extra_index_urls=urls) if urls else None,
        require_hashes=True,
    )


def text_of(lock: LockFile, path: KeyPath, label: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        lock.fail(path, f"{label}: expected a non-empty string, found {str(value)[:80]!r}")
    return value


def listed(lock: LockFile, path: KeyPath, label: str, value: object) -> list[Any]:
    """A list (absent: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        lock.fail(path, f"{label}: expected a list, found {str(value)[:80]!r}")
    return value
