"""Findings of `matrix verify` and their reports: text for people, JSON for scripts, Markdown for a CI
job summary; and the exit code (0 all holds, 1 drift, 5 some upstream could not be reached)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from builder.core.redact import redact

SCHEMA = 1


class Status(StrEnum):
    OK = "ok"
    MISSING = "missing"  # the matrix claims it; upstream does not have it
    YANKED = "yanked"
    RENAMED = "renamed"  # upstream has it under another name (a wheel's platform tag)
    DIFFERENT = "different"  # upstream says another value
    MOVED = "moved"  # a locked digest upstream no longer serves under that tag
    UNRECORDED = "unrecorded"  # upstream says something the matrix leaves out (not drift)
    UNCHECKED = "unchecked"  # upstream metadata cannot tell (not drift, and not a pass)
    UNREACHABLE = "unreachable"  # not checked: upstream could not be reached or read


DRIFT = frozenset({Status.MISSING, Status.YANKED, Status.RENAMED, Status.DIFFERENT, Status.MOVED})
_INFO = (Status.UNRECORDED, Status.UNCHECKED)


@dataclass(frozen=True)
class Finding:
    kind: str  # torch, companions, images, lock
    status: Status
    subject: str
    check: str
    claim: str  # what the matrix says
    upstream: str  # what upstream says, with where it says it
    where: str  # matrix.toml:LINE (or matrix.lock)

    def as_json(self) -> dict[str, str]:
        # A mirror's URL may carry credentials (--pypi-url https://user:token@...): never in a report.
        return {
            "kind": self.kind,
            "status": self.status.value,
            "subject": redact(self.subject),
            "check": self.check,
            "claim": self.claim,
            "upstream": redact(self.upstream),
            "where": self.where,
        }


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        found = Counter(f.status.value for f in self.findings)
        return {s.value: found.get(s.value, 0) for s in Status}

    @property
    def drift(self) -> list[Finding]:
        return [f for f in self.findings if f.status in DRIFT]

    @property
    def unreachable(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.UNREACHABLE]

    @property
    def exit_code(self) -> int:
        if self.drift:
            return 1
        return 5 if self.unreachable else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "total": len(self.findings),
            "seconds": round(self.seconds, 3),
            "cost": self.cost,
            "findings": [f.as_json() for f in self.findings],
        }


def _verdict(report: Report) -> str:
    if report.drift:
        return f"DRIFT: {len(report.drift)} finding(s) where matrix.toml and upstream disagree"
    if report.unreachable:
        return f"NOT VERIFIED: {len(report.unreachable)} item(s) could not be checked (upstream unreachable)"
    return "OK: every checked fact holds"


def _summary(report: Report) -> str:
    counts = {k: v for k, v in report.counts().items() if v}
    cost = report.cost
    return (
        ", ".join(f"{v} {k}" for k, v in counts.items())
        + f"; {cost.get('requests', 0)} requests, {cost.get('bytes', 0) / 1e6:.1f} MB, "
        + f"{cost.get('cache_hits', 0)} from the cache, {report.seconds:.1f} s"
    )


def _grouped(findings: list[Finding]) -> dict[str, list[Finding]]:
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.upstream.split(" is unreachable")[0] if f.status is Status.UNREACHABLE else f.check].append(f)
    return groups


def text(report: Report, *, verbose: bool = False) -> str:
    lines = [_verdict(report), _summary(report), ""]
    for f in report.drift:
        lines += [f"{f.status.value.upper():<10} {f.subject}: {f.check}", f"    matrix:   {f.claim} ({f.where})"]
        lines += [f"    upstream: {f.upstream}"]
    for host, items in sorted(_grouped(report.unreachable).items()):
        lines.append(f"UNREACHABLE {host}: {len(items)} item(s) not checked ({items[0].upstream})")
        lines += [f"    {f.subject}: {f.check}" for f in items] if verbose else []
    quiet = [f for f in report.findings if f.status in _INFO]
    for check, items in sorted(_grouped(quiet).items()):
        statuses = sorted({f.status.value for f in items})
        lines.append(f"{'/'.join(s.upper() for s in statuses)} {check}: {len(items)} item(s)")
        shown = items if verbose else items[:3]
        lines += [f"    {f.subject}: {f.upstream} ({f.where})" for f in shown]
        if len(items) > len(shown):
            lines.append(f"    ... {len(items) - len(shown)} more (--verbose)")
    if verbose:
        lines += [f"OK         {f.subject}: {f.check}" for f in report.findings if f.status is Status.OK]
    return redact("\n".join(lines).rstrip() + "\n")


def markdown(report: Report) -> str:
    lines = [f"## torchyard matrix verify: {_verdict(report)}", "", _summary(report), ""]
    rows = [[f.status.value, f.subject, f.check, f"{f.claim} (`{f.where}`)", f.upstream] for f in report.drift]
    for _, items in sorted(_grouped(report.unreachable).items()):
        rows.append(["unreachable", f"{len(items)} item(s)", "-", "-", items[0].upstream])
    if rows:
        lines += ["| status | item | check | matrix | upstream |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        lines.append("")
    if report.unreachable:
        lines += ["<details><summary>Not checked (upstream unreachable)</summary>", ""]
        lines += [f"- {f.subject}: {f.check}" for f in report.unreachable]
        lines += ["", "</details>", ""]
    quiet = Counter(f"{f.status.value}: {f.check}" for f in report.findings if f.status in _INFO)
    if quiet:
        lines += ["Not drift, not verified either:", ""]
        lines += [f"- {name} ({count})" for name, count in sorted(quiet.items())]
    return redact("\n".join(lines).rstrip() + "\n")
