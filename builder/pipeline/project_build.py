"""The project image, after its base (builder/pipeline/pipeline.py) passed or was up to date: build the project
stage FROM the base image, run the project's own checks in it (each import, the command's --help), tag it, push it
with --push unless the registry holds it already (the same content id), then (with the build's trust settings) attach
and sign what the registry lacks of its SBOM and provenance, as for the base. The base's smoke suite is the base's:
a project change never re-runs it. While torchyard.lock records no Python set, the build resolves the project's
requirements afresh (no image is reused) and, after the checks passed, records the set (project_set.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from builder.core.errors import BuildError
from builder.core.kinds import Status
from builder.core.process import check_cancelled
from builder.core.redact import redact
from builder.engine import Engine
from builder.pipeline.context_dir import write_context
from builder.pipeline.pipeline import BuildSettings, Log, secret_files
from builder.pipeline.project_attest import attest_project
from builder.pipeline.project_plan import PROJECT_CONTENT_LABEL, ProjectPlan, project_request
from builder.pipeline.project_set import record_python_set
from builder.pipeline.registry import Registry
from builder.render.tags import project_repository
from builder.trust.attest import Attested

PROJECT_DIR = "project"  # the project's build context, inside the base's output folder
CHECK_TIMEOUT = 600.0  # seconds for one check (an import of torch under emulation is slow)
TAIL_LINES = 5  # of a failed check's output, in its error line
# An image up to date (locally, or in the registry) was tagged, and pushed, only after its checks passed, and its
# content id says it is the same project: they are not run again.
PASSED_BEFORE = "passed when it was built (up to date: not run again)"


@dataclass
class ProjectOutcome:
    ref: str
    content_id: str
    status: Status = Status.PENDING  # built | up-to-date
    image_id: str = ""  # "" when up to date in the registry only (nothing built or pulled here)
    checks: list[tuple[str, str]] = field(default_factory=list)  # (each check, how it went)
    pushed: list[str] = field(default_factory=list)
    digest: str = ""  # the registry's digest of the tag, with --push (pushed now, or held already)
    seconds: float = 0.0
    started: datetime | None = None  # wall clock: the build's start, the checks' end (the provenance's times)
    finished: datetime | None = None
    attested: Attested | None = None  # what builder/trust attached in the registry (with --push and trust)


def build_project(
    engine: Engine, plan: ProjectPlan, settings: BuildSettings, log: Log, registry: Registry | None = None
) -> ProjectOutcome:
    """`settings`: the base's (repository, output folder, --push); the base image must be there (built or up to
    date) under its immutable tag. With --push the registry is asked first (`registry`: the client, made from
    settings.auth when not given): a tag holding this content id is neither built nor pushed again."""
    outcome = ProjectOutcome(plan.ref(settings.repo), plan.content_id)
    write_context(plan, settings.out_dir / PROJECT_DIR, force=settings.force)
    registry = (registry or Registry(settings.auth)) if settings.push else None
    fresh = plan.record_set is not None  # no Python set locked yet: resolved afresh, no image reused
    held = None if registry is None or fresh else held_digest(registry, plan, outcome.ref)
    local = None if fresh else engine.inspect(outcome.ref)
    if fresh:
        log("[project] torchyard.lock records no Python set yet: the build resolves it afresh and records it")
    if local is not None and local.labels.get(PROJECT_CONTENT_LABEL) == plan.content_id:
        outcome.image_id, outcome.status = local.id, Status.UP_TO_DATE
        outcome.checks = [(what, PASSED_BEFORE) for what, _ in plan.checks()]
        log(f"[project] {outcome.ref} is up to date locally: no build")
    elif held is not None:
        outcome.status = Status.UP_TO_DATE
        outcome.checks = [(what, PASSED_BEFORE) for what, _ in plan.checks()]
        log(f"[project] {outcome.ref} is up to date in the registry ({held}): no build, no push")
    else:
        if registry is not None:  # a registry that refuses the push is found before the build, not after it
            registry.check_push(project_repository(settings.repo, plan.name))
        with secret_files(plan.base, settings, True) as files:
            _build(engine, plan, settings, outcome, log, files)
        run_checks(engine, plan, outcome, log)
        outcome.finished = datetime.now(UTC)
        check_cancelled("tagging")
        engine.tag(outcome.image_id, outcome.ref)
        outcome.status = Status.BUILT
        log(f"[project] tagged {outcome.ref}")
        record_python_set(engine, plan, settings, outcome.image_id, log)
    if registry is not None:
        _push(engine, outcome, held, settings, log)
        _attest(engine, registry, plan, settings, outcome, log)
    return outcome


def held_digest(registry: Registry, plan: ProjectPlan, ref: str) -> str | None:
    """The tag's digest when the registry holds the project's image with exactly this content id (for the base's
    platform), else None. The project's own label is read: the base's content label, which the project image
    inherits, says nothing of the project."""
    top = registry.read(ref)
    if top is None:
        return None
    labels = registry.labels(ref, plan.base.combination.platform.value, top=top)
    return top.digest if labels is not None and labels.get(PROJECT_CONTENT_LABEL) == plan.content_id else None


def _push(engine: Engine, outcome: ProjectOutcome, held: str | None, settings: BuildSettings, log: Log) -> None:
    """Push the tag unless the registry holds this content under it already (said, with its digest)."""
    if held is not None:
        outcome.digest = held
        if outcome.image_id:  # the registry-only case said "no push" in its own line
            log(f"[project] {outcome.ref} is in the registry with this content already ({held}): not pushed")
        return
    check_cancelled("pushing")
    outcome.digest = engine.push(outcome.ref, settings.auth, lambda line: None)
    outcome.pushed.append(outcome.ref)
    log(f"[project] pushed {outcome.ref} ({outcome.digest})")


def _attest(
    engine: Engine, registry: Registry, plan: ProjectPlan, settings: BuildSettings, outcome: ProjectOutcome, log: Log
) -> None:
    """The base's attestation, for the project image under its tag (pushed now or held already): only what the
    registry lacks is written, so an image held and signed by this key gets nothing new."""
    if settings.trust is None:
        return
    check_cancelled("attesting")
    times = (outcome.started, outcome.finished)
    done = attest_project(
        engine, registry, plan, settings.repo, settings.trust, times, (outcome.image_id, settings.auth)
    )
    outcome.attested = done
    wrote = ", ".join(done.written) or "nothing new (already attached)"
    log(f"[project] attested {done.digest}: sbom {done.sbom}, provenance {done.provenance}; wrote {wrote}")


def _build(
    engine: Engine,
    plan: ProjectPlan,
    settings: BuildSettings,
    outcome: ProjectOutcome,
    log: Log,
    files: dict[str, str],
) -> None:
    folder = settings.out_dir / PROJECT_DIR
    request = project_request(plan, folder, settings.repo, files, settings.provenance)
    log_path = settings.out_dir / "build-project.log"
    log(f"[project] building {plan.name} on {plan.base_ref(settings.repo)} (log: {log_path})")
    start, outcome.started = time.monotonic(), datetime.now(UTC)
    with log_path.open("w", buffering=1) as build_log:

        def on_line(line: str) -> None:
            build_log.write(redact(line) + "\n")
            if settings.verbose:
                log(f"[project] {redact(line)}")

        try:
            outcome.image_id = engine.build(request, on_line)
        except BuildError as exc:
            raise BuildError(f"[project] {exc}. Log: {log_path}") from None
    outcome.seconds = time.monotonic() - start
    image = engine.inspect(outcome.image_id)
    if image is None or image.labels.get(PROJECT_CONTENT_LABEL) != plan.content_id:
        raise BuildError(f"[project] the engine built {outcome.image_id or 'no image'} without the project's labels")


def run_checks(engine: Engine, plan: ProjectPlan, outcome: ProjectOutcome, log: Log) -> None:
    """Each import, then the command's --help, in the built image (its WORKDIR, its environment); the first to fail
    stops the build, nothing tagged (exit 4), with the last lines it printed."""
    if not plan.imports:
        outcome.checks.append(("import", f"not checked ({plan.imports_from})"))
        log(f"[project] import check: not checked ({plan.imports_from})")
    for what, command in plan.checks():
        check_cancelled("the project's checks")
        result = engine.run(outcome.image_id, list(command), timeout=CHECK_TIMEOUT)
        if result.timed_out or result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exit {result.exit_code}"
            raise BuildError(f"[project] check `{what}` failed ({why}), nothing tagged: {_tail(result.output)}")
        outcome.checks.append((what, "passed"))
        log(f"[project] {what}: passed")


def _tail(output: str) -> str:
    lines = [line.strip() for line in redact(output).splitlines() if line.strip()]
    return " | ".join(lines[-TAIL_LINES:]) or "no output"


def project_report(plan: ProjectPlan, repo: str, outcome: ProjectOutcome | None, error: str = "") -> dict[str, Any]:
    """build-report.json's `project` (docs/schemas.md): the image's ref and content id, how it went, its digest in
    the registry (with --push; null without), its checks; `error`: why it failed (outcome None)."""
    if outcome is None:
        return {
            "ref": plan.ref(repo),
            "status": Status.FAILED.value,
            "content_id": plan.content_id,
            "error": redact(error),
        }
    return {
        "ref": outcome.ref,
        "status": outcome.status.value,
        "content_id": outcome.content_id,
        "seconds": round(outcome.seconds, 1),
        "digest": outcome.digest or None,
        "pushed": outcome.pushed,
        "checks": [_check_json(what, result) for what, result in outcome.checks],
    }


def _check_json(what: str, result: str) -> dict[str, str]:
    """{"check", "result": passed | not checked, "detail"?}: the three answers kept apart from their reasons."""
    if result.startswith("not checked"):
        return {"check": what, "result": "not checked", "detail": result.removeprefix("not checked ").strip("()")}
    detail = {} if result == "passed" else {"detail": "passed when the image was built; it is up to date"}
    return {"check": what, "result": "passed", **detail}
