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
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.core.files import read_text

KEYS = {"hygiene.stray_files": "path", "hygiene.caches": "path", "hygiene.pip_check": "package"}
_DATE = "%Y-%m-%d"


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
    try:
        doc = json.loads(read_text(path, "hygiene allowlist"))
    except ValueError as exc:
        raise UsageError(f"hygiene allowlist {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"hygiene allowlist {path}: expected an object keyed by check name ({', '.join(KEYS)})")
    entries = []
    for key, items in sorted(doc.items()):
        if key not in KEYS:
            raise UsageError(f"hygiene allowlist {path}: {key!r} is not one of {', '.join(KEYS)}")
        if not isinstance(items, list):
            raise UsageError(f"hygiene allowlist {path}: {key}: expected a list of entries")
        entries += [_entry(path, key, index, item) for index, item in enumerate(items)]
    return tuple(entries)


def _entry(path: str | Path, key: str, index: int, item: Any) -> Accepted:
    where = f"hygiene allowlist {path}: {key}[{index}]"
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected an object")
    value, reason, expiry = (str(item.get(k) or "").strip() for k in (KEYS[key], "reason_to_ignore", "expiry"))
    if not value:
        raise UsageError(f"{where}: no {KEYS[key]}")
    if not reason or reason.upper() == "N/A":
        raise UsageError(f"{where} ({value}): no reason_to_ignore: say why it is accepted")
    try:
        until = datetime.datetime.strptime(expiry, _DATE).date()
    except ValueError:
        raise UsageError(f"{where} ({value}): expiry {expiry!r} is not a date (YYYY-MM-DD)") from None
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
