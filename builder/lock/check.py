"""`torchyard lock check LOCK...`: does each pinned file still hold on the index the lock names? The index's
project page is read fresh (PEP 691 JSON where the index speaks it, PEP 503 HTML otherwise: PyPI, PyTorch's
download.pytorch.org/whl/<variant>) and every pin judged:

- holds: the file is there with the pinned sha256 (a requirements.txt pin: some file of the version has it);
- changed: the index serves the file with another sha256, or a newer build of it (same version and tags, a
  higher build tag: what an installer now takes, as torch 2.10.0's re-upload of 2026-03-11 was) shadows it,
  or no file of the version has a pinned hash;
- gone: the file (or the version, or the project) is no longer on the index;
- not checked: the index gives no sha256 for the file; unreachable: the index could not be read.

Each finding names the index and both hashes, the pinned one and the one served now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from builder.core.errors import UpstreamError
from builder.lock.pins import LockFile, Pin
from builder.net.http import Http
from builder.upstream.index import IndexFile, IndexFormatError, ProjectPage, read_project

HOLDS, CHANGED, GONE, NOT_CHECKED, UNREACHABLE = "holds", "changed", "gone", "not checked", "unreachable"
SHOWN = 3  # files named at most in one finding


@dataclass(frozen=True, kw_only=True)
class Finding:
    pin: Pin
    status: str
    index: str  # the index that answered (or could not be read)
    now: tuple[tuple[str, str | None], ...] = ()  # (file, sha256) the index serves now in the pin's place
    detail: str = ""

    def as_json(self) -> dict[str, object]:
        pin = self.pin
        return {"name": pin.name, "version": pin.version, "file": pin.filename, "pinned": list(pin.hashes),
                "where": pin.where, "status": self.status, "index": self.index,
                "now": [{"file": f, "sha256": s} for f, s in self.now], "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class _Parsed:
    name: str
    version: Version
    build: BuildTag
    tags: frozenset[Tag]  # empty for an sdist


Page = ProjectPage | None | str  # None: the index has no such project; str: why it could not be read


def check_locks(http: Http, locks: Sequence[LockFile]) -> tuple[Finding, ...]:
    """Every pin of every lock, judged against its indexes; each project page read once, in parallel."""
    pins = [(lock, pin) for lock in locks for pin in lock.pins]
    keys = sorted({(index, pin.name) for _, pin in pins for index in pin.indexes})
    pages = dict(zip(keys, http.map(lambda key: _read(http, *key), keys), strict=True))
    return tuple(judge(lock, pin, [(i, pages[(i, pin.name)]) for i in pin.indexes]) for lock, pin in pins)


def _read(http: Http, index: str, name: str) -> Page:
    try:
        return read_project(http, index, name)
    except (UpstreamError, IndexFormatError) as exc:
        return str(exc)


def judge(lock: LockFile, pin: Pin, answers: list[tuple[str, Page]]) -> Finding:
    """One pin against what its indexes answered (in the pin's order)."""
    for index, page in answers:
        if isinstance(page, str):
            return Finding(pin=pin, status=UNREACHABLE, index=index, detail=page)
    files = [(index, f) for index, page in answers if isinstance(page, ProjectPage) for f in page.files]
    return _by_file(pin, files) if pin.filename else _by_hash(lock, pin, files)


def _by_file(pin: Pin, files: list[tuple[str, IndexFile]]) -> Finding:
    index, pinned = pin.indexes[0], pin.hashes[0]
    same = [f for _, f in files if f.filename == pin.filename]
    if not same:
        rebuilt = _same_tags(pin.filename or "", files)
        now = "; it now serves " + _named(rebuilt) if rebuilt else ""
        return Finding(pin=pin, status=GONE, index=index, now=_pairs(rebuilt),
                       detail=f"{pin.filename} (sha256 {pinned}) is no longer on {index}{now}")  # fmt: skip
    served = same[0]
    if served.sha256 is None:
        return Finding(pin=pin, status=NOT_CHECKED, index=index, now=_pairs([served]),
                       detail=f"{index} gives no sha256 for {served.filename}: pinned sha256 {pinned}")  # fmt: skip
    if served.sha256 not in pin.hashes:
        return Finding(pin=pin, status=CHANGED, index=index, now=_pairs([served]),
                       detail=f"{served.filename}: pinned sha256 {pinned}, {index} now serves sha256 "
                              f"{served.sha256}")  # fmt: skip
    return _shadowed(pin, index, served, files)


def _by_hash(lock: LockFile, pin: Pin, files: list[tuple[str, IndexFile]]) -> Finding:
    """A requirements.txt pin names no file: it holds while a file of the version has a pinned hash."""
    where = ", ".join(pin.indexes)
    of_version = [(i, f) for i, f in files if _is_version(f, pin)]
    matched = next(((i, f) for i, f in of_version if f.sha256 in pin.hashes), None)
    if matched is not None:
        return _shadowed(pin, matched[0], matched[1], files)
    if not of_version:
        detail = f"no file of {pin.name}=={pin.version} on {where} (pinned sha256 {pin.hashes[0]})"
        return Finding(pin=pin, status=GONE, index=where, detail=detail)
    fitting = [(i, f) for i, f in of_version if _fits(f, lock.python, lock.machine)] or of_version
    index = fitting[0][0]
    shown = [f for _, f in fitting]
    if all(f.sha256 is None for _, f in of_version):  # nothing to compare with: neither holds nor changed
        return Finding(pin=pin, status=NOT_CHECKED, index=index, now=_pairs(shown),
                       detail=f"{index} gives no sha256 for {pin.name}=={pin.version}: pinned sha256 "
                              f"{', '.join(pin.hashes)}")  # fmt: skip
    return Finding(pin=pin, status=CHANGED, index=index, now=_pairs(shown),
                   detail=f"pinned sha256 {', '.join(pin.hashes)}; {index} now serves {_named(shown)}")  # fmt: skip


def _shadowed(pin: Pin, index: str, served: IndexFile, files: list[tuple[str, IndexFile]]) -> Finding:
    """The pinned file holds, unless a newer build of it (same version and tags, higher build tag) is there."""
    mine = _parse(served.filename)
    others = [(f, _parse(f.filename)) for f in _same_tags(served.filename, files)]
    newer = [f for f, p in others if mine is not None and p is not None and p.build > mine.build]
    if newer:
        return Finding(pin=pin, status=CHANGED, index=index, now=_pairs(newer),
                       detail=f"{served.filename} (sha256 {served.sha256}) is still on {index}, but a newer build "
                              f"shadows it, which installers now take: {_named(newer)}")  # fmt: skip
    yanked = " (yanked there)" if served.yanked else ""
    return Finding(pin=pin, status=HOLDS, index=index, now=_pairs([served]),
                   detail=f"{served.filename} sha256 {served.sha256} on {index}{yanked}")  # fmt: skip


def _same_tags(filename: str, files: list[tuple[str, IndexFile]]) -> list[IndexFile]:
    """The other files of the same project, version and wheel tags (another build of the same wheel)."""
    mine = _parse(filename)
    if mine is None or not mine.tags:
        return []
    return [f for _, f in files if f.filename != filename and (p := _parse(f.filename)) is not None
            and (p.name, p.version, p.tags) == (mine.name, mine.version, mine.tags)]  # fmt: skip


def _is_version(file: IndexFile, pin: Pin) -> bool:
    parsed = _parse(file.filename)
    try:
        return parsed is not None and parsed.name == pin.name and parsed.version == Version(pin.version)
    except InvalidVersion:
        return False


def _fits(file: IndexFile, python: str | None, machine: str | None) -> bool:
    """Whether a file could be the one installed for the lock's Python and machine (an sdist always could)."""
    parsed = _parse(file.filename)
    if parsed is None or not parsed.tags or python is None:
        return True
    xy = python.replace(".", "")
    interpreters, abis = {f"cp{xy}", f"py{xy}", f"py{xy[0]}"}, {f"cp{xy}", "abi3", "none"}
    return any(
        t.interpreter in interpreters and t.abi in abis
        and (t.platform == "any" or machine is None or t.platform.endswith("_" + machine))
        for t in parsed.tags
    )  # fmt: skip


def _parse(filename: str) -> _Parsed | None:
    try:
        if filename.endswith(".whl"):
            name, version, build, tags = parse_wheel_filename(filename)
            return _Parsed(str(name), version, build, frozenset(tags))
        name, version = parse_sdist_filename(filename)
        return _Parsed(str(name), version, (), frozenset())
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def _pairs(files: list[IndexFile]) -> tuple[tuple[str, str | None], ...]:
    return tuple((f.filename, f.sha256) for f in files)


def _named(files: list[IndexFile]) -> str:
    shown = ", ".join(f"{f.filename} sha256 {f.sha256 or 'not given'}" for f in files[:SHOWN])
    return shown + (f" and {len(files) - SHOWN} more" if len(files) > SHOWN else "")
