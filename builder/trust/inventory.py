"""Read an image's contents for its SBOM: builder/image/inventory.py run inside the image, its one JSON line
parsed into a frozen Inventory. Made from what the image holds, not from what the plan asked for."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from builder.core.errors import BuildError
from builder.engine import Engine
from builder.image.inventory import INVENTORY_MARK

SCRIPT = Path(__file__).resolve().parents[1] / "image" / "inventory.py"
TIMEOUT = 300


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    architecture: str
    source: str | None
    licenses: tuple[str, ...] | None = None  # its copyright file's short names (DEP-5); None: not recorded


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str
    license: str | None  # None: the distribution's metadata names none
    sha256: str | None  # None: not recorded (no installer record, no index file of the build's indexes)
    tags: tuple[str, ...] = ()  # the WHEEL file's tags (the wheel it was installed from); (): none recorded
    local: str | None = None  # the URL PEP 610's direct_url.json names (an install from no index)
    sha256_from: str | None = None  # where the sha256 is from: INSTALLER, or the index it was located on
    sha256_file: str | None = None  # the index file it is the hash of (a wheel; the sdist of one built in the image)


INSTALLER = "installer"  # sha256_from: the archive hash the installer recorded (PEP 610's direct_url.json)


@dataclass(frozen=True)
class Inventory:
    dpkg: tuple[DebianPackage, ...] | None  # None: the image has no dpkg status database
    distributions: tuple[Distribution, ...]
    stack: dict[str, str | None]  # torch, cuda, cudnn, nccl, archs as torch reports them; None: not recorded
    python: str


def read_inventory(engine: Engine, image: str, stack: Mapping[str, str | None] | None = None) -> Inventory:
    """Run the inventory script with the image's own `python` (python3 where there is no `python`). `stack`:
    torch's answers as the smoke suite read them in this image; torch is then not imported again (seconds of
    CPU per image, minutes on a loaded machine)."""
    command = ["python", "-c", SCRIPT.read_text(), *(["--no-torch"] if stack is not None else [])]
    result = engine.run(image, command, timeout=TIMEOUT)
    if result.exit_code == 127:
        result = engine.run(image, ["python3", *command[1:]], timeout=TIMEOUT)
    line = next((ln for ln in result.output.splitlines() if ln.startswith(INVENTORY_MARK)), None)
    if result.exit_code != 0 or line is None:
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        raise BuildError(f"reading the contents of {image} for its SBOM {why}: {result.output.strip()[-400:]}")
    found = parse_inventory(json.loads(line[len(INVENTORY_MARK) :]))
    return found if stack is None else replace(found, stack=dict(stack))


def stack_of(observed: Mapping[str, object]) -> dict[str, str | None]:
    """The SBOM's stack from the smoke suite's "observed" object (builder/smoke/manifest.py's Observed)."""
    archs = observed.get("torch_arch_list")
    found = {key: observed.get(key) for key in ("torch", "cuda", "cudnn", "nccl")}
    found["archs"] = " ".join(str(a) for a in archs) if isinstance(archs, list) and archs else None
    return {key: None if value is None else str(value) for key, value in found.items()}


def parse_inventory(data: dict[str, Any]) -> Inventory:
    dpkg = data.get("dpkg")
    packages = None
    if isinstance(dpkg, list):
        packages = tuple(
            DebianPackage(str(p["package"]), str(p.get("version") or ""), str(p.get("architecture") or ""),
                          _text(p.get("source")), _names(p.get("licenses")))
            for p in dpkg
        )  # fmt: skip
    dists = tuple(_distribution(d) for d in data.get("distributions") or [])
    stack = {str(k): _text(v) for k, v in dict(data.get("stack") or {}).items()}
    return Inventory(packages, dists, stack, str(data.get("python") or ""))


def _distribution(d: dict[str, Any]) -> Distribution:
    sha256 = _text(d.get("sha256"))
    return Distribution(
        str(d["name"]),
        str(d["version"]),
        _text(d.get("license")),
        sha256,
        tags=tuple(str(t) for t in d.get("tags") or ()),
        local=_text(d.get("local")),
        sha256_from=INSTALLER if sha256 else None,
    )


def _names(value: object) -> tuple[str, ...] | None:
    """A package's license names; None (not recorded) for a missing, empty or malformed list."""
    names = tuple(str(n) for n in value if n) if isinstance(value, list) else ()
    return names or None


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)
