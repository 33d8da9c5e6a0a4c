"""The hygiene checks' accepted exceptions: what a team allows for a while beyond the image contract, each with a
reason and an expiry date, in the security gate's style (builder/pipeline/allowlist.py, docs/security-gate.md).

An object keyed by check name, each a list of entries: `path` (an fnmatch pattern of an image path: `*` also
matches `/`) for hygiene.stray_files and hygiene.caches, `package` (a distribution name) for hygiene.pip_check;
`reason_to_ignore` and `expiry` (YYYY-MM-DD) are required. An entry counts until its expiry day; after it, it is
ignored (the check fails again) and reported as expired.

    {"hygiene.pip_check": [{"package": "torchtext", "reason_to_ignore": "the old text pipeline still pins it",
                            "expiry": "2027-01-31"}]}
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.pipeline.dated_entries import entry_object, read_lists, reason_and_expiry

KEYS = {"hygiene.stray_files": "path", "hygiene.caches": "path", "hygiene.pip_check": "package"}


@dataclass(frozen=True)
class Accepted:
    check: str
    value: str  # the path pattern or the distribution
    reason: str
    expiry: datetime.date

    def line(self) -> str:
        return f"{self.check} {self.value} (until {self.expiry}: {self.reason})"


def read_hygiene_allowlist(path: str | Path) -> tuple[Accepted, ...]:
    """The entries of the file; UsageError (exit 2) naming the file and the entry for a malformed one."""
    entries = []
    for key, items in read_lists(path, "hygiene allowlist", f"check name ({', '.join(KEYS)})"):
        if key not in KEYS:
            raise UsageError(f"hygiene allowlist {path}: {key!r} is not one of {', '.join(KEYS)}")
        entries += [_entry(f"hygiene allowlist {path}: {key}[{i}]", key, item) for i, item in enumerate(items)]
    return tuple(entries)


def _entry(where: str, key: str, item: Any) -> Accepted:
    item = entry_object(where, item)
    value = str(item.get(KEYS[key]) or "").strip()
    if not value:
        raise UsageError(f"{where}: no {KEYS[key]}")
    reason, until = reason_and_expiry(f"{where} ({value})", item, "say why it is accepted")
    return Accepted(key, value, reason, until)


def current(entries: tuple[Accepted, ...], today: datetime.date) -> tuple[Accepted, ...]:
    return tuple(e for e in entries if e.expiry >= today)


def expired(entries: tuple[Accepted, ...], today: datetime.date) -> tuple[Accepted, ...]:
    return tuple(e for e in entries if e.expiry < today)


def for_suite(entries: tuple[Accepted, ...]) -> dict[str, list[str]]:
    """What the in-image suite's --accept file holds: check name -> the values it accepts."""
    found: dict[str, list[str]] = {}
    for entry in entries:
        found.setdefault(entry.check, []).append(entry.value)
    return found
