"""uv.lock (https://docs.astral.sh/uv/concepts/projects/layout/#the-lockfile), version 1, read as the hashed
requirements set `uv export` would give: every `[[package]]` pinned `name==version` with the hashes of its sdist
and wheels, the project's own packages (an `editable` or `virtual` source: the root and workspace members) left
out. It is installed with `--require-hashes` into the image's venv like any hashed requirements file, never with
`uv sync` (which would remove what the base installed).

A package has no marker of its own in uv.lock; its line gets one from its `resolution-markers` (the forks that
chose this version) and the markers of the dependency edges that lead to it (when every edge has one). A marker of
an edge further up is not carried down: such a package is installed wherever the lock lists it.

Refused, one line each: a `git` source (hash-checking installs no unhashed VCS checkout), a `path` or
`directory` source (a file or folder of that machine: give it with --pip ./path), a version other than 1.
"""

from __future__ import annotations

from collections import defaultdict
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
from builder.render.pins import canonical
from builder.render.reqtypes import Requirements

OWN = ("editable", "virtual")  # the project and its workspace members: not a dependency
LOCAL = ("path", "directory")
Edges = dict[tuple[str, str | None], list[str | None]]


def read_uv_lock(path: Path, shown: str) -> Requirements:
    lock = open_lock(path, shown, "a uv.lock")
    version = lock.doc.get("version")
    if version != 1:
        lock.fail(("version",), f"version = {version!r}: torchyard reads uv.lock version 1 (uv 0.5 and later)")
    raw = lock.doc.get("package", [])
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        lock.fail(("package",), "package: expected [[package]] tables")
    edges = _edges(raw)
    return requirements(lock, [_package(lock, i, p, edges) for i, p in enumerate(raw) if not _own(p)])


def _own(p: dict[str, Any]) -> bool:
    source = p.get("source")
    return isinstance(source, dict) and any(k in source for k in OWN)


def _edges(raw: list[dict[str, Any]]) -> Edges:
    """The markers of the dependency edges into each (name, version) (version None: the edge names none)."""
    found: Edges = defaultdict(list)
    for p in raw:
        for dep in _dependencies(p):
            if isinstance(dep, dict) and isinstance(dep.get("name"), str):
                marker, version = dep.get("marker"), dep.get("version")
                key = (canonical(dep["name"]), version if isinstance(version, str) else None)
                found[key].append(marker if isinstance(marker, str) else None)
    return found


def _dependencies(p: dict[str, Any]) -> list[Any]:
    """Every dependency edge out of p (anything else is ignored here: _package refuses it at its line)."""
    found = list(p.get("dependencies") or []) if isinstance(p.get("dependencies"), list) else []
    for group in ("optional-dependencies", "dev-dependencies"):
        table = p.get(group, {})
        for deps in table.values() if isinstance(table, dict) else ():
            found += deps if isinstance(deps, list) else []
    return found


def _package(lock: LockFile, i: int, p: dict[str, Any], edges: Edges) -> Package:
    at = ("package", i)
    name = text_of(lock, (*at, "name"), "package name", p.get("name"))
    source = p.get("source")
    kind = next(iter(source), None) if isinstance(source, dict) and len(source) == 1 else None
    if kind == "git":
        lock.fail((*at, "source"), f"package {name}: a git source has no hash, and a hashed install takes none; "
                  "publish it to an index, or give it with --pip git+https://...")  # fmt: skip
    if kind in LOCAL:
        lock.fail((*at, "source"), f"package {name}: a {kind} source is a file or folder of the machine that locked "
                  "it; give it with --pip ./path")  # fmt: skip
    if kind not in ("registry", "url") or not isinstance(source, dict):
        lock.fail((*at, "source"), f"package {name}: source {source!r}: expected registry, url, git, path, "
                  "directory, editable or virtual")  # fmt: skip
    version = text_of(lock, (*at, "version"), f"package {name}: version", p.get("version"))
    url = checked_url(lock, (*at, "source"), name, source[kind], index=kind == "registry")
    listed(lock, (*at, "dependencies"), f"package {name}: dependencies", p.get("dependencies"))
    forks = listed(
        lock, (*at, "resolution-markers"), f"package {name}: resolution-markers", p.get("resolution-markers")
    )
    return Package(where=lock.where(at), name=name, version=version, marker=_marker(forks, name, version, edges),
                   hashes=_hashes(lock, at, name, p), url=url if kind == "url" else None,
                   index=url if kind == "registry" else None)  # fmt: skip


def _hashes(lock: LockFile, at: tuple[str, int], name: str, p: dict[str, Any]) -> tuple[str, ...]:
    files = [p["sdist"]] if isinstance(p.get("sdist"), dict) else []
    files += [
        w for w in listed(lock, (*at, "wheels"), f"package {name}: wheels", p.get("wheels")) if isinstance(w, dict)
    ]
    return tuple(checked_hash(lock, at, name, f.get("hash")) for f in files)


def _marker(forks: list[Any], name: str, version: str, edges: Edges) -> str | None:
    """The forks that chose this version, and the edges' markers when every edge into it has one."""
    forks = [m for m in forks if isinstance(m, str)]
    into = edges.get((canonical(name), version), []) + edges.get((canonical(name), None), [])
    conditions = [_any(forks)] if forks else []
    if into and all(into):
        conditions.append(_any(sorted({m for m in into if m})))
    conditions = list(dict.fromkeys(conditions))
    if len(conditions) > 1:
        return " and ".join(f"({c})" for c in conditions)
    return conditions[0] if conditions else None


def _any(markers: list[str]) -> str:
    return markers[0] if len(markers) == 1 else " or ".join(f"({m})" for m in markers)
