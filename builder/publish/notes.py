"""A publish's release notes (`torchyard publish --notes FILE`): Markdown for a CI job's summary or a release
page, from the same Report the JSON `--report` is: each published image with its digest and build tag, and for a
refresh (`--refresh TOKEN`) what it changed, package by package (builder/pipeline/refresh.py), or that it changed
nothing (the published digest kept), or why it was not compared; a base that lists no security suite is said
first. Facts only from the report: an item the report has no refresh object for says nothing about packages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.core.files import write_report_file
from builder.core.kinds import Status
from builder.core.redact import redact
from builder.publish.report import ItemResult, Report

MAX_LISTED = 200  # changes listed per image (a distribution upgrade can move hundreds); the JSON report has all


def release_notes(report: Report) -> str:
    published = [i for i in report.items if i.status in (Status.BUILT, Status.SKIPPED) and i.ref]
    lines = ["# Published images", "", *(_table(published) or ["Nothing was published."]), *_failed(report)]
    refreshed = [i for i in published if i.refresh]
    if refreshed:
        lines += ["", f"## Package changes (refresh {refreshed[0].refresh.get('token', '')})"]
        for item in refreshed:
            lines += ["", f"### `{item.ref}`", "", *_changes(item.refresh)]
    return "\n".join(lines) + "\n"


def _table(published: list[ItemResult]) -> list[str]:
    rows = [f"| `{i.ref}` | {_what(i)} | `{i.digest or 'not recorded'}` | {_code(i.build_tag)} |" for i in published]
    return ["| image | this run | digest | build tag |", "|---|---|---|---|", *rows] if rows else []


def _failed(report: Report) -> list[str]:
    failed = [i for i in report.items if i.status == Status.FAILED]
    listed = [f"- `{i.id}`: {(i.reason.splitlines() or ['failed'])[0][:200]}" for i in failed]
    return ["", "Not published (failed; the report and the logs say more):", "", *listed] if listed else []


def write_notes(report: Report, path: Path) -> None:
    write_report_file(path, redact(release_notes(report)))


def _what(item: ItemResult) -> str:
    if item.refresh.get("packages") == "unchanged":
        return "unchanged by the refresh (kept)"
    return "built and pushed" if item.status == Status.BUILT else "up to date (skipped)"


def _code(text: str) -> str:
    return f"`{text}`" if text else "none this run"


def _changes(refresh: dict[str, Any]) -> list[str]:
    found = [f"> **Warning:** {refresh['sources']}", ""] if "no security suite" in str(refresh.get("sources")) else []
    packages = str(refresh.get("packages") or "not compared")
    changes = list(refresh.get("changes") or [])
    if packages == "unchanged":
        return [*found, f"No package changed: the published image {refresh.get('compared_with')} stays."]
    if not changes:
        return [*found, f"Packages {packages}."]
    listed = [_line(c) for c in changes[:MAX_LISTED]]
    more = [f"- ... and {len(changes) - MAX_LISTED} more (the JSON report lists every one)"]
    return [
        *found,
        f"Against {refresh.get('compared_with')}:",
        "",
        *listed,
        *(more if len(changes) > MAX_LISTED else []),
    ]


def _line(change: dict[str, Any]) -> str:
    name = f"{change['kind']} `{change['name']}`"
    if change["change"] == "changed":
        return f"- {name} {change['old']} → {change['new']}"
    return f"- {name} {change['new'] or change['old']} ({change['change']})"
