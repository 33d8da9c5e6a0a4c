"""An image's installed distributions, read in a container from what the image holds (builder/image/installed.py
run by the image's own Python, without network)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import BuildError, UsageError
from builder.engine import Engine

SCRIPT = Path(__file__).resolve().parents[1] / "image" / "installed.py"
NOT_FOUND = 127  # as a shell says it: no such executable in the image
TIMEOUT = 120


@dataclass(frozen=True, kw_only=True)
class Installed:
    """One distribution as the image holds it (builder/image/installed.py)."""

    name: str  # normalised (PEP 503)
    version: str
    tags: tuple[str, ...]  # the WHEEL file's tags: cp311-cp311-manylinux_2_28_x86_64; () when it has none
    installer: str | None
    local: str | None  # the file or URL a direct_url.json names (an install from no index); None: from an index


@dataclass(frozen=True)
class ImageSet:
    ref: str
    image_id: str
    python: str
    machine: str
    dists: tuple[Installed, ...]


def read_image_set(engine: Engine, ref: str) -> ImageSet:
    """What the image holds; UsageError (2) for an image not in the engine or with no Python, BuildError (4)
    when the run failed."""
    info = engine.inspect(ref)
    if info is None:
        raise UsageError(f"no image {ref!r} in the engine (pull or build it first)")
    source = SCRIPT.read_text()
    result = engine.run(ref, ["python", "-c", source], timeout=TIMEOUT)
    if result.exit_code == NOT_FOUND:  # many images have only python3
        result = engine.run(ref, ["python3", "-c", source], timeout=TIMEOUT)
    if result.exit_code == NOT_FOUND:
        raise UsageError(f"{ref}: no python or python3 in the image: nothing to lock")
    report = _report(result.output) if result.exit_code == 0 and not result.timed_out else None
    if report is None:
        why = "timed out" if result.timed_out else f"exited {result.exit_code}"
        raise BuildError(f"{ref}: reading its Python distributions {why}: {result.output.strip()[-400:]}")
    dists = tuple(_installed(entry) for entry in report["dists"])
    return ImageSet(ref, info.id, str(report["python"]), str(report["machine"]), dists)


def _report(output: str) -> dict[str, Any] | None:
    """The script's one JSON line (a warning the interpreter printed may come before it)."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                return None
            return found if isinstance(found, dict) and found.get("schema") == 1 else None
    return None


def _installed(entry: dict[str, Any]) -> Installed:
    direct = entry.get("direct_url")
    local = str(direct.get("url")) if isinstance(direct, dict) and direct.get("url") else None
    return Installed(
        name=str(entry["name"]),
        version=str(entry["version"]),
        tags=tuple(str(t) for t in entry.get("tags") or ()),
        installer=entry.get("installer"),
        local=local,
    )
