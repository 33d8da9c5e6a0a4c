"""The security gate of a publish (`torchyard publish --security-gate`), run on each image after its smoke suite
passed and before anything is tagged or pushed.

OS packages: a pending update from the distribution's security suite (builder/pipeline/security.py) fails the image
(exit 4, naming each package) unless a current allowlist entry covers it (builder/pipeline/allowlist.py); an expired
entry fails. A security suite that cannot be read fails too: the gate does not pass what it could not check. An
OS without a known security suite is "not checked".

Python distributions: the advisories PyPI's JSON API lists for each installed version (OSV data, as pip-audit
reads it), reported and not gating; "not checked" with the reason when PyPI could not be asked, never "clean".
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.core.errors import BuildError, TorchyardError
from builder.engine import Engine
from builder.net.http import Http
from builder.pipeline.allowlist import Entry, Verdict, judge
from builder.pipeline.image_set import Installed, read_image_set
from builder.pipeline.security import (
    DebPackage,
    Suite,
    fetch_suite,
    installed_packages,
    os_release,
    pending,
    suite_of,
)

PYPI_JSON = "https://pypi.org/pypi"
STATUS = "/var/lib/dpkg/status"
STATUS_LIMIT = 32 << 20
NONE: tuple[Verdict, ...] = ()


@dataclass(frozen=True)
class GateResult:
    os: str  # "clean" | "N pending, all allowed" | "not checked: why"
    python: str  # "no advisories known (PyPI)" | "N advisories" | "not checked: why"
    verdicts: tuple[Verdict, ...] = ()
    advisories: tuple[str, ...] = ()  # "torch 2.14.1: GHSA-... (fixed in 2.15.0)"

    def as_json(self) -> dict[str, Any]:
        return {
            "os": self.os,
            "os_pending": [
                {
                    "package": v.finding.package,
                    "installed": v.finding.installed,
                    "update": v.finding.candidate,
                    "suite": v.finding.suite,
                    "allowed": v.allowed,
                    "why": v.why,
                }
                for v in self.verdicts
            ],
            "python": self.python,
            "python_advisories": list(self.advisories),
        }


@dataclass(frozen=True)
class Packages:
    """What the gate reads, from wherever it was read: `subject` names the image in a blocking message; `debian` and
    `release` None when not recorded (`missing` says why: the OS part is then "not checked")."""

    subject: str
    debian: tuple[DebPackage, ...] | None
    release: dict[str, str] | None
    python: tuple[Installed, ...]
    missing: str = ""


@dataclass(frozen=True)
class SecurityGate:
    http: Http
    allowlist: tuple[Entry, ...] = ()
    today: datetime.date = field(default_factory=lambda: datetime.datetime.now(datetime.UTC).date())

    def check(self, engine: Engine, image: str, platform: str) -> GateResult:
        """The gate's findings on a local image (its dpkg status and os-release read from it, no container runs);
        BuildError naming every package that blocks the image."""
        release = engine.read_file(image, "/usr/lib/os-release") or engine.read_file(image, "/etc/os-release")
        status = engine.read_file(image, STATUS, limit=STATUS_LIMIT)
        os_state, verdicts = "not checked: the image has no os-release or dpkg status", NONE
        if release is not None and status is not None:
            found = os_release(release.decode("utf-8", "replace"))
            os_state, verdicts = self._os(found, installed_packages(status.decode("utf-8", "replace")), platform)
        _block(image[:19], verdicts)
        python, advisories = self._python(lambda: read_image_set(engine, image).dists)
        return GateResult(os_state, python, verdicts, advisories)

    def check_packages(self, packages: Packages, platform: str) -> GateResult:
        """The gate's findings on packages read from elsewhere (a published image's SBOM, builder/publish/policy.py):
        the same rules, the same BuildError."""
        os_state, verdicts = f"not checked: {packages.missing}", NONE
        if packages.debian is not None and packages.release is not None:
            os_state, verdicts = self._os(packages.release, packages.debian, platform)
        _block(packages.subject, verdicts)
        python, advisories = self._python(lambda: list(packages.python))
        return GateResult(os_state, python, verdicts, advisories)

    def _os(
        self, release: dict[str, str], installed: tuple[DebPackage, ...], platform: str
    ) -> tuple[str, tuple[Verdict, ...]]:
        suite = suite_of(release, platform)
        if not isinstance(suite, Suite):
            return f"not checked: {suite}", ()
        try:
            offered = fetch_suite(self.http, suite)
        except TorchyardError as exc:
            raise BuildError(
                f"security gate: could not read {suite.name} ({exc}): not checked, so not passed"
            ) from None
        findings = pending(installed, offered, suite.name)
        verdicts = judge(findings, self.allowlist, self.today)
        if not findings:
            return f"clean: no pending {suite.name} update", verdicts
        return f"{len(findings)} pending {suite.name} update(s), each allowed", verdicts

    def _python(self, read: Callable[[], Sequence[Installed]]) -> tuple[str, tuple[str, ...]]:
        try:
            every = read()
            dists = [d for d in every if d.local is None]
            found = self.http.map(self._advisories, dists)
        except TorchyardError as exc:
            return f"not checked: PyPI's advisories could not be read ({exc})", ()
        unknown = [d.name for d in every if d.local is not None]
        unknown += [d.name for d, lines in zip(dists, found, strict=True) if lines is None]
        advisories = tuple(line for lines in found for line in lines or ())
        rest = f"; not checked (not on PyPI): {', '.join(sorted(unknown))}" if unknown else ""
        if not advisories:
            return f"no advisories known to PyPI for {len(every) - len(unknown)} distributions{rest}", ()
        return f"{len(advisories)} advisories known to PyPI (reported, not gating){rest}", advisories

    def _advisories(self, dist: Installed) -> list[str] | None:
        """PyPI's advisories for this version; None when PyPI does not have it (another index's build)."""
        reply = self.http.get(f"{PYPI_JSON}/{dist.name}/{dist.version}/json")
        if reply.status == 404:
            return None
        if not reply.ok:
            raise BuildError(f"{reply.url}: HTTP {reply.status}")
        entries = reply.json().get("vulnerabilities") or []
        return [_advisory(dist, e) for e in entries if isinstance(e, dict) and not e.get("withdrawn")]


def _block(image: str, verdicts: tuple[Verdict, ...]) -> None:
    """BuildError naming every pending update no current allowlist entry covers."""
    blocked = [v for v in verdicts if not v.allowed]
    if not blocked:
        return
    named = "; ".join(f"{v.finding.package} {v.finding.installed} -> {v.finding.candidate} ({v.why})" for v in blocked)
    raise BuildError(
        f"security gate: {len(blocked)} package(s) of {image} have a pending {blocked[0].finding.suite} "
        f"update: {named}; rebuild with --refresh, or add an allowlist entry (docs/security-gate.md)"
    )


def _advisory(dist: Installed, entry: dict[str, Any]) -> str:
    fixed = ", ".join(str(v) for v in entry.get("fixed_in") or []) or "no fixed version"
    return f"{dist.name} {dist.version}: {entry.get('id')} (fixed in: {fixed})"
