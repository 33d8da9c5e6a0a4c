"""What the security gate's allowlist and the hygiene allowlist share: a JSON object of lists of entries, each
accepted for a reason until an expiry date. Both files name the file and the entry in one line (exit 2) when
malformed; the wording stays each file's own (`what`)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.core.files import read_text

_DATE = "%Y-%m-%d"


def read_lists(path: str | Path, what: str, shape: str) -> Iterator[tuple[str, list[Any]]]:
    """(key, entries) of the file's object, keys sorted; `shape` says what the object should be keyed by."""
    try:
        doc = json.loads(read_text(path, what))
    except ValueError as exc:
        raise UsageError(f"{what} {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{what} {path}: expected an object keyed by {shape}")
    for key, items in sorted(doc.items()):
        if not isinstance(items, list):
            raise UsageError(f"{what} {path}: {key!r}: expected a list of entries")
        yield key, items


def reason_and_expiry(where: str, item: Any, needs: str) -> tuple[str, datetime.date]:
    """An entry's `reason_to_ignore` (required, not "N/A") and `expiry` (YYYY-MM-DD); `needs` ends the line of a
    missing reason (what the reason should say)."""
    reason, expiry = (str(item.get(k) or "").strip() for k in ("reason_to_ignore", "expiry"))
    if not reason or reason.upper() == "N/A":
        raise UsageError(f"{where}: no reason_to_ignore: {needs}")
    try:
        return reason, datetime.datetime.strptime(expiry, _DATE).date()
    except ValueError:
        raise UsageError(f"{where}: expiry {expiry!r} is not a date (YYYY-MM-DD)") from None


def entry_object(where: str, item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected an object")
    return item
