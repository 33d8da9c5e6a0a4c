"""Map a key path in a TOML document (torch[3].variants[1].cuda) to its line, for error messages.

tomllib keeps no positions; a light scan of table headers and `key =` lines is enough for the
layout matrix.toml uses (one key per line, tables and arrays of tables as headers).
"""

from __future__ import annotations

import re

Segment = str | int
KeyPath = tuple[Segment, ...]

_HEADER_RE = re.compile(r"^\[(\[?)\s*([A-Za-z0-9_.\-\"]+)\s*\]\]?")
_KEY_RE = re.compile(r"^([A-Za-z0-9_\-]+)\s*=")


class Locator:
    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        self._scan(text)

    def line_of(self, path: KeyPath) -> int | None:
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None

    def _scan(self, text: str) -> None:
        counts: dict[KeyPath, int] = {}
        current: KeyPath = ()
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            header = _HEADER_RE.match(line)
            if header:
                current = _header_path(header[2].replace('"', "").split("."), bool(header[1]), current, counts)
                self._lines.setdefault(current, lineno)
                continue
            key = _KEY_RE.match(line)
            if key:
                self._lines.setdefault((*current, key[1]), lineno)


def _header_path(names: list[str], is_array: bool, current: KeyPath, counts: dict[KeyPath, int]) -> KeyPath:
    path: KeyPath = ()
    for name in names[:-1]:
        path = (*path, name)
        position = len(path)
        if position < len(current) and current[position - 1] == name and isinstance(current[position], int):
            path = (*path, current[position])
    path = (*path, names[-1])
    if not is_array:
        return path
    index = counts.get(path, 0)
    counts[path] = index + 1
    return (*path, index)
