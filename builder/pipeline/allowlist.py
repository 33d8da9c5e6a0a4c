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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.core.errors import UsageError
from builder.pipeline.dated_entries import entry_object, read_lists, reason_and_expiry
from builder.pipeline.security import Pending


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
    shape = "package name (AWS DLC's format)"
    return tuple(
        _entry(f"allowlist {path}: {key}[{index}]", key, item)
        for key, items in read_lists(path, "allowlist", shape)
        for index, item in enumerate(items)
    )


def _entry(where: str, key: str, item: Any) -> Entry:
    item = entry_object(where, item)
    ident = str(item.get("vulnerability_id") or "").strip()
    if not ident:
        raise UsageError(f"{where}: no vulnerability_id")
    reason, until = reason_and_expiry(f"{where} ({ident})", item, "say why the update may wait")
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
