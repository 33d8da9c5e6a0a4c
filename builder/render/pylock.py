"""PEP 751's pylock.toml (https://packaging.python.org/en/latest/specifications/pylock-toml/), lock-version 1.x,
read as a hashed requirements set: every `[[packages]]` pinned `name==version` with its `marker` and the hashes
of its `sdist` and `wheels` (an `archive` as `name @ URL` with its hashes). `torchyard lock export` writes such a
file, so its own pylock.toml reads back.

Refused, one line each: a `vcs` or `directory` package and a file given by `path` (none has a hash a hashed
install can check, or it names a file of the machine that locked it), a marker naming the lock's `extras` or
`dependency_groups` (pip judges requirements, not a lock's selections), a lock-version other than 1.x.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from builder.render.lockread import (
    LockFile,
    Package,
    checked_hash,
    checked_url,
    listed,
    open_lock,
    requirements,
    text_of,
)
from builder.render.reqtypes import Requirements

ALGORITHMS = ("sha256", "sha384", "sha512")  # those pip and uv check
LOCK_ONLY = re.compile(r"\b(extras|dependency_groups)\b")  # PEP 751's marker names of a lock, not of an install
At = tuple[str, int]


def is_pylock(name: str) -> bool:
    """PEP 751's names: pylock.toml, or pylock.NAME.toml."""
    parts = name.split(".")
    return name == "pylock.toml" or (len(parts) == 3 and parts[0] == "pylock" and parts[2] == "toml" and parts[1] != "")


def read_pylock(path: Path, shown: str) -> Requirements:
    lock = open_lock(path, shown, "a pylock.toml")
    version = lock.doc.get("lock-version")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        lock.fail(("lock-version",), f"lock-version = {version!r}: torchyard reads PEP 751 lock-version 1.x")
    raw = lock.doc.get("packages", [])
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        lock.fail(("packages",), "packages: expected [[packages]] tables")
    return requirements(lock, [_package(lock, ("packages", i), p) for i, p in enumerate(raw)])


def _package(lock: LockFile, at: At, p: dict[str, Any]) -> Package:
    name = text_of(lock, (*at, "name"), "package name", p.get("name"))
    for kind in ("vcs", "directory"):
        if kind in p:
            lock.fail((*at, kind), f"package {name}: a {kind} package has no hash a hashed install can check; "
                      "publish it to an index, or give it with --pip")  # fmt: skip
    marker = _marker(lock, at, name, p.get("marker"))
    index = checked_url(lock, (*at, "index"), name, p["index"], index=True) if "index" in p else None
    if isinstance(p.get("archive"), dict):
        url = checked_url(lock, (*at, "archive"), name, p["archive"].get("url"))
        hashes = _hashes(lock, (*at, "archive"), name, p["archive"])
        return Package(where=lock.where(at), name=name, version="", marker=marker, hashes=hashes, url=url)
    version = text_of(lock, (*at, "version"), f"package {name}: version", p.get("version"))
    files = [p["sdist"]] if isinstance(p.get("sdist"), dict) else []
    files += [
        w for w in listed(lock, (*at, "wheels"), f"package {name}: wheels", p.get("wheels")) if isinstance(w, dict)
    ]
    if not files:
        lock.fail(at, f"package {name}: no sdist, wheels or archive to install")
    hashes = tuple(h for f in files for h in _hashes(lock, at, name, f))
    return Package(where=lock.where(at), name=name, version=version, marker=marker, hashes=hashes, index=index)


def _marker(lock: LockFile, at: At, name: str, value: object) -> str | None:
    if value is None:
        return None
    marker = text_of(lock, (*at, "marker"), f"package {name}: marker", value)
    if LOCK_ONLY.search(marker):
        why = "names the lock's extras or dependency groups, which an install from requirements cannot judge"
        lock.fail((*at, "marker"), f"package {name}: marker {marker[:80]!r} {why}; export the lock for one set of them")
    return marker


def _hashes(lock: LockFile, at: tuple[Any, ...], name: str, file: dict[str, Any]) -> tuple[str, ...]:
    """The file's hashes pip can check; a file given only by `path` (this lock's machine) is refused."""
    if "url" not in file:
        lock.fail(at, f"package {name}: a file given by path, not url ({str(file.get('path'))[:80]!r}); "
                  "give it with --pip ./path")  # fmt: skip
    table = file.get("hashes")
    found = [f"{a}:{table[a]}" for a in ALGORITHMS if isinstance(table, dict) and a in table]
    if not found:
        lock.fail(at, f"package {name}: a file without a sha256, sha384 or sha512 hash")
    return tuple(checked_hash(lock, at, name, h) for h in found)
