"""Run the smoke suite (builder/smoke) inside an image and read back its JSON report."""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from builder.core.errors import BuildError
from builder.engine import Engine, Mount
from builder.pipeline import uid_run
from builder.pipeline.hygiene_allowlist import Accepted, current, expired, for_suite
from builder.smoke.manifest import Observed

HOST_SMOKE = Path(__file__).resolve().parents[1] / "smoke"
IN_IMAGE_SMOKE = "/opt/torchyard/smoke"
MOUNTED_SMOKE = "/opt/torchyard-host/smoke"
OUT = "/torchyard-out"
ACCEPT = "accept.json"  # in OUT: the hygiene allowlist's current entries, for the suite's --accept


@dataclass(frozen=True, kw_only=True)
class SmokeOptions:
    arch: str | None = None
    gpus: str | None = None  # None / "none": GPU checks are skipped (reported, never passed)
    require_gpu: bool = False
    expect: dict[str, str] = field(default_factory=dict)  # --expect-<key> overrides
    expect_file: Path | None = None
    use_host_copy: bool = False
    only: tuple[str, ...] = ()  # run only the checks whose names start with these
    timeout: float = 1800
    small: bool = False  # smaller problems: the image runs emulated (another platform) or on a simulated GPU
    timeout_scale: float = 1.0  # every check's timeout (and the whole run's) times this
    accepted: tuple[Accepted, ...] = ()  # --hygiene-allowlist: the hygiene checks' accepted exceptions
    today: datetime.date | None = None  # the day the allowlist's expiry dates are read against (None: today)


EMULATED_TIMEOUT_SCALE = 10.0  # QEMU runs aarch64 torch several times slower than the host runs x86_64 torch


def for_platform(options: SmokeOptions, image_platform: str, engine_platform: str) -> SmokeOptions:
    """The same options, scaled for emulation when the image's platform is not the engine's own: the suite's
    problems shrink where they have a smaller size (--small) and every timeout grows, so a slow emulated CPU is not
    a failed check."""
    if image_platform == engine_platform:
        return options
    return replace(options, small=True, timeout_scale=max(options.timeout_scale, EMULATED_TIMEOUT_SCALE))


@dataclass(frozen=True)
class SmokeReport:
    exit_code: int
    data: dict[str, Any]
    junit: str
    output: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def checks(self) -> list[dict[str, Any]]:
        return list(self.data.get("checks", []))

    @property
    def observed(self) -> Observed:
        return Observed.from_dict(dict(self.data.get("observed", {})))

    @property
    def summary(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in dict(self.data.get("summary", {})).items()}

    def failures(self) -> list[str]:
        return [f"{c['name']}: {c['message']}" for c in self.checks if c["status"] == "failed"]


def run_smoke(engine: Engine, image: str, options: SmokeOptions, *, in_image: bool) -> SmokeReport:
    """in_image: the image carries torchyard's suite at /opt/torchyard/smoke (else the host copy is mounted)."""
    with tempfile.TemporaryDirectory(prefix="torchyard-smoke-") as tmp:
        os.chmod(tmp, 0o777)  # the suite may run as the image's non-root user
        mounts = [Mount(tmp, OUT, read_only=False)]
        suite = IN_IMAGE_SMOKE
        if options.use_host_copy or not in_image:
            mounts.append(Mount(str(HOST_SMOKE), MOUNTED_SMOKE))
            suite = MOUNTED_SMOKE
        command = ["python", suite, "--json", f"{OUT}/smoke.json", "--junit", f"{OUT}/junit.xml"]
        if options.expect_file is not None:
            mounts.append(Mount(str(options.expect_file.resolve()), "/torchyard-expect.json"))
            command += ["--expect", "/torchyard-expect.json"]
        command += _flags(options) + _accept(options, tmp)
        timeout = options.timeout * options.timeout_scale
        result = engine.run(image, command, mounts=tuple(mounts), gpus=options.gpus, timeout=timeout)
        if result.exit_code == 127:  # no `python` on PATH: many images only have python3
            command[0] = "python3"
            result = engine.run(image, command, mounts=tuple(mounts), gpus=options.gpus, timeout=timeout)
        report_path = Path(tmp) / "smoke.json"
        if result.timed_out or not report_path.exists():
            reason = "timed out" if result.timed_out else f"exited {result.exit_code} without a report"
            raise BuildError(f"smoke suite in {image} {reason}: {result.output.strip()[-600:]}")
        junit = (Path(tmp) / "junit.xml").read_text() if (Path(tmp) / "junit.xml").exists() else ""
        found = SmokeReport(result.exit_code, json.loads(report_path.read_text()), junit, result.output)
        if uid_run.left_to_host(found.data):
            suite_mounts = tuple(m for m in mounts if m.target == MOUNTED_SMOKE)
            done = uid_run.probe(engine, image, command[:2], suite_mounts, options.timeout_scale)
            found = replace(found, **uid_run.merged(found, done))
        return _with_allowlist(found, options)


def _accept(options: SmokeOptions, tmp: str) -> list[str]:
    """--accept with the allowlist's current entries (none: no flag, so a suite older than it still runs)."""
    entries = current(options.accepted, options.today or datetime.date.today())
    if not entries:
        return []
    (Path(tmp) / ACCEPT).write_text(json.dumps(for_suite(entries)))
    return ["--accept", f"{OUT}/{ACCEPT}"]


def _with_allowlist(found: SmokeReport, options: SmokeOptions) -> SmokeReport:
    """The allowlist's entries in the report: those applied, those expired (ignored: their check fails again)."""
    if not options.accepted:
        return found
    today = options.today or datetime.date.today()
    gone = expired(options.accepted, today)
    applied = current(options.accepted, today)
    listed = {"applied": [e.line() for e in applied], "expired": [e.line() for e in gone]}
    data = dict(found.data, hygiene_allowlist=listed)
    lines = [f"hygiene allowlist: expired, ignored: {e.line()}" for e in gone]
    return replace(found, data=data, output=found.output.rstrip() + "".join(f"\n{line}" for line in lines) + "\n")


def _flags(options: SmokeOptions) -> list[str]:
    flags = ["--arch", options.arch] if options.arch else []
    if options.require_gpu:
        flags.append("--require-gpu")
    for key, value in sorted(options.expect.items()):
        flags += [f"--expect-{key}", value]
    for prefix in options.only:
        flags += ["--only", prefix]
    if options.small:
        flags.append("--small")
    if options.timeout_scale != 1.0:
        flags += ["--timeout-scale", f"{options.timeout_scale:g}"]
    return flags
