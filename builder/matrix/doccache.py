"""TOML parsing for the loader, with a JSON copy of the packaged matrix's parse result.

tomllib is pure Python: parsing the 70 KB matrix.toml is the slowest single step of a
`torchyard lookup` (about 25 ms). The copy holds only what tomllib returned for exactly this text,
keyed by the text's SHA-256 and the Python version, so it cannot go stale; every check of the
loader and validator still runs on it. Any problem with the cache directory is ignored and the text
is parsed as if there were no copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

# The XDG base-directory variable: where per-user caches go (~/.cache when unset).
CACHE_HOME_ENV = "XDG_CACHE_HOME"


class TomlSyntaxError(ValueError):
    """tomllib's message, "... (at line L, column C)"."""


def parse_toml(text: str, *, cache: bool = False) -> dict[str, Any]:
    """tomllib.loads(text); with cache=True, from the JSON copy when this exact text was parsed before."""
    path = cache_file(text) if cache else None
    doc = _read(path) if path is not None else None
    if doc is not None:
        return doc
    import tomllib  # only on a miss: a hit needs no TOML parser at all

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlSyntaxError(str(exc)) from None
    if path is not None:
        _write(path, doc)
    return doc


def cache_file(text: str) -> Path | None:
    import hashlib

    try:
        home = Path(os.environ.get(CACHE_HOME_ENV) or Path.home() / ".cache")
    except RuntimeError:  # no home directory to be found
        return None
    if not home.is_absolute():  # "~" left unexpanded, or a relative XDG_CACHE_HOME (which XDG says to ignore)
        return None
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
    return home / "torchyard" / f"matrix-{digest}-py{sys.version_info[0]}{sys.version_info[1]}.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _write(path: Path, doc: dict[str, Any]) -> None:
    try:
        data = json.dumps(doc, separators=(",", ":"))
    except (TypeError, ValueError):  # TOML dates and times have no JSON form: just parse next time
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
