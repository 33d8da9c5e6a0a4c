"""What changed between two package sets: the Debian packages and Python distributions of an image, with their
versions, as its SBOM lists them (builder/trust/sbom.py) or as its Inventory read them (builder/trust/inventory.py).

A refresh (`--refresh TOKEN`) compares the image it just built with the SBOM of the one published under the same
tag (builder/pipeline/refresh.py), and `promote --keep-unchanged` compares a refreshed candidate's SBOM with the
public image's (builder/publish/promote_refresh.py): the same set means nothing new to publish; a different one is
published, and these changes are what its report, release notes and promote output list. Both sides are keyed
alike, (kind, name, architecture), so an SBOM compares with an Inventory: the SBOM's own fields (name, version, its
purl's type and arch qualifier), never a re-derived guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from builder.render.pins import canonical  # PEP 503: the name pip compares (Typing_Extensions = typing-extensions)
from builder.trust.inventory import Inventory

DEB, PYPI = "deb", "pypi"
Key = tuple[str, str, str]  # (deb | pypi, name (a distribution's canonical one), dpkg architecture or "")
Packages = Mapping[Key, str]  # -> version


@dataclass(frozen=True)
class Change:
    kind: str  # deb | pypi
    name: str
    arch: str  # a Debian package's architecture ("" for a distribution)
    old: str | None  # None: added
    new: str | None  # None: removed

    @property
    def what(self) -> str:
        return "added" if self.old is None else "removed" if self.new is None else "changed"

    def describe(self) -> str:
        """One line: `deb libssl3 3.0.15-1~deb12u1 -> 3.0.17-1~deb12u1`, `pypi pip 25.1 (added)`."""
        if self.old is not None and self.new is not None:
            return f"{self.kind} {self.name} {self.old} -> {self.new}"
        return f"{self.kind} {self.name} {self.new or self.old} ({self.what})"

    def as_json(self) -> dict[str, str | None]:
        return {"kind": self.kind, "name": self.name, "arch": self.arch, "change": self.what,
                "old": self.old, "new": self.new}  # fmt: skip


def of_inventory(inventory: Inventory) -> dict[Key, str]:
    """The package set an Inventory holds (no dpkg status database: no Debian packages)."""
    found: dict[Key, str] = {(DEB, p.name, p.architecture): p.version for p in inventory.dpkg or ()}
    found.update({(PYPI, canonical(d.name), ""): d.version for d in inventory.distributions})
    return found


def of_sbom(content: bytes) -> dict[Key, str]:
    """The package set a CycloneDX SBOM lists: its components whose purl is a deb or a pypi one. ValueError when
    the content is not an SBOM's JSON (the caller says "not compared" with it)."""
    data = json.loads(content)
    if not isinstance(data, dict) or not isinstance(data.get("components", []), list):
        raise ValueError("not a CycloneDX document (no components list)")
    found: dict[Key, str] = {}
    for component in data.get("components") or []:
        key = _key(component) if isinstance(component, dict) else None
        if key is not None:
            found[key] = str(component.get("version") or "")
    return found


def _key(component: Mapping[str, Any]) -> Key | None:
    purl, name = str(component.get("purl") or ""), str(component.get("name") or "")
    kind = purl.removeprefix("pkg:").split("/", 1)[0] if purl.startswith("pkg:") else ""
    if kind == PYPI and name:
        return PYPI, canonical(name), ""
    if kind == DEB and name:
        qualifiers = dict(parse_qsl(purl.partition("?")[2].partition("#")[0]))
        return DEB, name, qualifiers.get("arch", "")
    return None  # the image itself, or a kind torchyard does not list


def diff(old: Packages, new: Packages) -> tuple[Change, ...]:
    """Every package added, removed or at another version, Debian packages first, each kind by name."""
    changes = [
        Change(key[0], key[1], key[2], old.get(key), new.get(key))
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]
    return tuple(changes)
