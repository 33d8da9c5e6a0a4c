"""The security gate's allowlist: pending security updates a team accepted for a while, each with a reason.

The format is AWS Deep Learning Containers' OS scan allowlist (`*.os_scan_allowlist.json`): an object keyed by
package name, each a list of entries with `vulnerability_id`, `reason_to_ignore` and, optionally,
`package_name` and `package_details.version`; other fields of DLC's entries (description, severity, ...) are
kept as they are and not read. torchyard adds one required field, `expiry` (YYYY-MM-DD): an entry covers the
package until that day, and fails the gate after it.

    {"openssl": [{"vulnerability_id": "DSA-5800-1", "package_name": "libssl3",
                  "package_details": {"version": "3.0.15-1~deb12u1"},
                  "reason_to_ignore": "TLS is not used by the training jobs", "expiry": "2027-01-31"}]}

An entry covers a pending update of the binary package (or of its source package) it is keyed by; with
`package_details.version`, only the update to exactly that version (a later security update is not covered).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.core.files import read_text
from builder.pipeline.security import Pending

_DATE = "%Y-%m-%d"


@dataclass(frozen=True)
class Entry:
    package: str
    id: str
    reason: str
    expiry: datetime.date
    version: str | None  # the security update it covers; None: any


@dataclass(frozen=True)
class Verdict:
    finding: Pending
    entry: Entry | None
    allowed: bool
    why: str  # one line: the reason it passes or fails


def read_allowlist(path: str | Path) -> tuple[Entry, ...]:
    """The entries of an allowlist file; UsageError (exit 2) naming the file and the entry for a malformed one."""
    text = read_text(path, "allowlist")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"allowlist {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"allowlist {path}: expected an object keyed by package name (AWS DLC's format)")
    entries = []
    for key, items in sorted(doc.items()):
        if not isinstance(items, list):
            raise UsageError(f"allowlist {path}: {key!r}: expected a list of entries")
        entries += [_entry(path, key, index, item) for index, item in enumerate(items)]
    return tuple(entries)


def _entry(path: str | Path, key: str, index: int, item: Any) -> Entry:
    where = f"allowlist {path}: {key}[{index}]"
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected an object")
    ident, reason, expiry = (str(item.get(k) or "").strip() for k in ("vulnerability_id", "reason_to_ignore", "expiry"))
    if not ident:
        raise UsageError(f"{where}: no vulnerability_id")
    if not reason or reason.upper() == "N/A":
        raise UsageError(f"{where} ({ident}): no reason_to_ignore: say why the update may wait")
    try:
        until = datetime.datetime.strptime(expiry, _DATE).date()
    except ValueError:
        raise UsageError(f"{where} ({ident}): expiry {expiry!r} is not a date (YYYY-MM-DD)") from None
    details = item.get("package_details")
    version = details.get("version") if isinstance(details, dict) else None
    package = str(item.get("package_name") or key)
    return Entry(package, ident, reason, until, str(version) if version else None)


def judge(findings: tuple[Pending, ...], entries: tuple[Entry, ...], today: datetime.date) -> tuple[Verdict, ...]:
    """Each pending update with the entry that covers it (a current one before an expired one)."""
    verdicts = []
    for finding in findings:
        covering = [e for e in entries if _covers(e, finding)]
        current = [e for e in covering if e.expiry >= today]
        if current:
            entry = current[0]
            verdicts.append(Verdict(finding, entry, True, f"allowed until {entry.expiry} ({entry.id}: {entry.reason})"))
        elif covering:
            entry = covering[0]
            verdicts.append(Verdict(finding, entry, False, f"its allowlist entry {entry.id} expired on {entry.expiry}"))
        else:
            verdicts.append(Verdict(finding, None, False, "no allowlist entry covers it"))
    return tuple(verdicts)


def _covers(entry: Entry, finding: Pending) -> bool:
    named = entry.package in (finding.package, finding.source)
    return named and (entry.version is None or entry.version == finding.candidate)
