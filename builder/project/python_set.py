"""torchyard.lock's `python_set`: the distributions a project's requirements installed over its base image, read
from the project image after its checks passed, and the pins a later build installs them by.

What is recorded is what the image holds and the base does not (name and version), with the sha256 of the file
it was installed from where the image records one (PEP 610's direct_url.json, or the index the build's SBOM
located it on), else "not recorded" and why. An install from a direct URL or a local path is recorded with that
URL and is not pinned: the requirement file (hashed in the lock) names its file, and a local package's version is
the project's own to change.

The pins are a constraints file (`name==version`, builder/project/image.py): pip, the installer of the project's
layer, takes `-c` beside the base's constraints in a hash-checked install (`--require-hashes`) and in a plain one
alike, and a constraint installs nothing by itself, so a pin of a package no longer asked for is inert. A hashed
requirements file could not be used: the hashes are not all known, and it would install the set whether asked
or not."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from builder.render.pins import canonical
from builder.trust.inventory import Distribution

NOT_RECORDED = "not recorded: the first build after the lock was written records it"
NO_HASH = "not recorded: pip keeps no hash of an index install (a recording build with --attest looks it up)"
LOCAL_NO_HASH = "not recorded: installed from a direct URL or local path, which recorded no archive hash"
PINS_FILE = "torchyard-lock-constraints.txt"  # in the build context and the image's /opt/torchyard
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True, kw_only=True)
class PythonPackage:
    name: str  # normalised (PEP 503)
    version: str
    sha256: str  # 64 hex digits, or "not recorded: why"
    local: str | None = None  # the direct URL it was installed from (not pinned); None: from an index

    @property
    def pinned(self) -> bool:
        return self.local is None


PythonSet = str | tuple[PythonPackage, ...]  # a str: not recorded, and why


def installed_over(base: Iterable[Distribution], image: Iterable[Distribution]) -> tuple[PythonPackage, ...]:
    """What `image` holds that `base` does not (by name and version), sorted by name: the project's set."""
    held = {(canonical(d.name), d.version) for d in base}
    found = {canonical(d.name): _package(d) for d in image if (canonical(d.name), d.version) not in held}
    return tuple(found[name] for name in sorted(found))


def _package(d: Distribution) -> PythonPackage:
    why = LOCAL_NO_HASH if d.local else NO_HASH
    return PythonPackage(name=canonical(d.name), version=d.version, sha256=d.sha256 or why, local=d.local)


def pins_text(packages: tuple[PythonPackage, ...]) -> str:
    """The constraints file of the set's pinned packages ("" when none is pinned)."""
    lines = [f"{p.name}=={p.version}" for p in packages if p.pinned]
    if not lines:
        return ""
    head = "# torchyard.lock's python_set: the versions a build of this lock installs (generated; do not edit)"
    return "\n".join([head, *lines]) + "\n"


def set_lines(python_set: PythonSet) -> list[str]:
    """torchyard.lock's `python_set = ...` line(s): the reason it is not recorded, or one line per package."""
    q = json.dumps
    if isinstance(python_set, str):
        return [f"python_set = {q(python_set)}"]
    rows = [f"  {{ {_fields(p)} }}," for p in python_set]
    return ["python_set = [  # what the project installed over the base image, read from the image", *rows, "]"]


def _fields(p: PythonPackage) -> str:
    pairs = [("name", p.name), ("version", p.version), ("sha256", p.sha256)]
    pairs += [("local", p.local)] if p.local else []
    return ", ".join(f"{key} = {json.dumps(value)}" for key, value in pairs)


def parse_package(raw: Any) -> PythonPackage:
    """One entry of python_set; ValueError says what is wrong (the lock's reader locates it)."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected {{ name, version, sha256 }}, found {raw!r}")
    unknown = sorted(set(raw) - {"name", "version", "sha256", "local"})
    if unknown or not {"name", "version", "sha256"} <= set(raw):
        raise ValueError(f"expected the keys name, version, sha256 (and local), found {sorted(raw)}")
    sha = _text(raw["sha256"])
    if not sha.startswith("not recorded") and (len(sha) != 64 or not set(sha) <= _HEX):
        raise ValueError(f"{sha!r} is not a sha256 (or 'not recorded: why')")
    local = _text(raw["local"]) if "local" in raw else None
    return PythonPackage(name=canonical(_text(raw["name"])), version=_text(raw["version"]), sha256=sha, local=local)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or any(ord(ch) < 32 for ch in value):
        raise ValueError(f"expected a non-empty one-line string, found {value!r}")
    return value
