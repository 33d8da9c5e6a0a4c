"""A lock file read back for `torchyard lock check`: each pinned file with its sha256, the indexes it is
expected on and the line it is written at. PEP 751's pylock.toml (as `lock export` writes it, or any with
`[[packages]]` naming wheels or an sdist with a sha256) and a hashed requirements.txt (`name==version
--hash=sha256:...`, with `--index-url` / `--extra-index-url`). What cannot be read is a UsageError naming
FILE:LINE (exit 2)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builder.core.errors import UsageError
from builder.lock.locate import PYPI

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TOML_LINE = re.compile(r"at line (\d+)")
_PACKAGES = re.compile(r"^\s*\[\[\s*packages\s*\]\]\s*(#.*)?$")
_ENVIRONMENT = re.compile(r'(platform_machine|python_version)\s*==\s*"([^"]+)"')
_REQ_HEADER = re.compile(r"^#\s*Python (\d+\.\d+) on linux (\w+)", re.MULTILINE)
_INDEX_FLAGS = {"--index-url": 0, "-i": 0, "--extra-index-url": 1}
_QUIET_FLAGS = ("--require-hashes",)


@dataclass(frozen=True, kw_only=True)
class Pin:
    name: str  # normalised (PEP 503)
    version: str
    indexes: tuple[str, ...]  # simple API roots, in the order an installer asks them
    filename: str | None  # the file the lock names (pylock.toml); None: any file of the version (requirements)
    hashes: tuple[str, ...]  # sha256 hex digests the lock accepts for it
    where: str  # FILE:LINE


@dataclass(frozen=True, kw_only=True)
class LockFile:
    path: Path
    pins: tuple[Pin, ...]
    python: str | None  # 3.11: the Python the lock is for, where it says (requirements: the files it takes)
    machine: str | None  # x86_64 | aarch64


def read_lock(path: Path) -> LockFile:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the lock: {getattr(exc, 'strerror', None) or exc}") from None
    return read_pylock(path, text) if path.suffix == ".toml" else read_requirements(path, text)


def read_pylock(path: Path, text: str) -> LockFile:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = _TOML_LINE.search(str(exc))
        raise UsageError(f"{path}:{line.group(1) if line else 1}: not TOML: {str(exc).split(' (at')[0]}") from None
    lines = [n for n, line in enumerate(text.splitlines(), 1) if _PACKAGES.match(line)]
    packages = doc.get("packages")
    if not isinstance(packages, list) or not packages:
        raise UsageError(f"{path}:1: no [[packages]]: not a pylock.toml torchyard lock export writes")
    env = dict(_ENVIRONMENT.findall(" ".join(str(e) for e in doc.get("environments") or [])))
    pins = [pin for at, package in enumerate(packages) for pin in _pylock_pins(path, lines, at, package)]
    return LockFile(path=path, pins=tuple(pins), python=env.get("python_version"), machine=env.get("platform_machine"))


def _pylock_pins(path: Path, lines: list[int], at: int, package: Any) -> list[Pin]:
    where = f"{path}:{lines[at] if at < len(lines) else 1}"
    if not isinstance(package, dict) or not package.get("name") or not package.get("version"):
        raise UsageError(f"{where}: a package needs a name and a version")
    files = [*(package.get("wheels") or []), *([package["sdist"]] if package.get("sdist") else [])]
    if not files:
        raise UsageError(f"{where}: package {package['name']}: no wheels and no sdist: nothing to check")
    index = str(package.get("index") or PYPI)
    return [_pylock_pin(where, package, index, f) for f in files]


def _pylock_pin(where: str, package: dict[str, Any], index: str, file: Any) -> Pin:
    name = str(package["name"])
    sha = (file.get("hashes") or {}).get("sha256") if isinstance(file, dict) else None
    filename = (file.get("name") or str(file.get("url") or "").rsplit("/", 1)[-1]) if isinstance(file, dict) else ""
    if not filename or not isinstance(sha, str) or not _SHA256.match(sha):
        raise UsageError(f"{where}: package {name}: each file needs a name (or url) and a sha256 hash")
    return Pin(name=str(canonicalize_name(name)), version=str(package["version"]), indexes=(index,),
               filename=str(filename), hashes=(sha,), where=where)  # fmt: skip


def read_requirements(path: Path, text: str) -> LockFile:
    indexes: list[list[str]] = [[], []]  # --index-url, --extra-index-url
    found: list[tuple[int, Requirement, tuple[str, ...]]] = []
    header = _REQ_HEADER.search(text)
    for number, line in _logical_lines(text):
        words = line.split()
        if words[0] in _INDEX_FLAGS and len(words) == 2:
            indexes[_INDEX_FLAGS[words[0]]].append(words[1])
        elif words[0] not in _QUIET_FLAGS:
            found.append((number, *_requirement(f"{path}:{number}", words)))
    roots = tuple(dict.fromkeys((indexes[0][-1:] or [PYPI]) + indexes[1]))
    pins = tuple(
        Pin(name=str(canonicalize_name(req.name)), version=str(next(iter(req.specifier)).version), indexes=roots,
            filename=None, hashes=hashes, where=f"{path}:{number}")
        for number, req, hashes in found
    )  # fmt: skip
    if not pins:
        raise UsageError(f"{path}:1: no pinned requirement: not a requirements.txt torchyard lock export writes")
    python, machine = (header.group(1), header.group(2)) if header else (None, None)
    return LockFile(path=path, pins=pins, python=python, machine=machine)


def _requirement(where: str, words: list[str]) -> tuple[Requirement, tuple[str, ...]]:
    hashes = tuple(w.removeprefix("--hash=sha256:") for w in words if w.startswith("--hash=sha256:"))
    text = " ".join(w for w in words if not w.startswith("--hash="))
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{where}: not a requirement: {exc}") from None
    pinned = [s for s in req.specifier if s.operator == "=="] if len(req.specifier) == 1 else []
    if not pinned or "*" in pinned[0].version or req.url:
        raise UsageError(f"{where}: {req.name}: not pinned with == to one version (name==version --hash=sha256:...)")
    if not hashes or not all(_SHA256.match(h) for h in hashes):
        raise UsageError(f"{where}: {req.name}: no --hash=sha256:<64 hex digits>: nothing to check")
    return req, hashes


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, the line with its continuations joined), comments and blank lines left out."""
    found: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        start, joined = pending or (number, "")
        joined = f"{joined} {line.removesuffix(chr(92))}".strip()
        pending = (start, joined) if line.endswith("\\") else None
        if pending is None and joined:
            found.append((start, joined))
    if pending and pending[1]:
        found.append(pending)
    return found
