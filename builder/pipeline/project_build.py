"""The project image, after its base (builder/pipeline/pipeline.py) passed or was up to date: build the project
stage FROM the base image, run the project's own checks in it (each import, the command's --help), tag it, push it
with --push. The base's smoke suite is the base's: a project change never re-runs it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from builder.core.errors import BuildError
from builder.core.kinds import Status
from builder.core.process import check_cancelled
from builder.core.redact import redact
from builder.engine import Engine
from builder.pipeline.context_dir import write_context
from builder.pipeline.pipeline import BuildSettings, Log, secret_files
from builder.pipeline.project_plan import PROJECT_CONTENT_LABEL, ProjectPlan, project_request

PROJECT_DIR = "project"  # the project's build context, inside the base's output folder
CHECK_TIMEOUT = 600.0  # seconds for one check (an import of torch under emulation is slow)
TAIL_LINES = 5  # of a failed check's output, in its error line


@dataclass
class ProjectOutcome:
    ref: str
    status: Status = Status.PENDING  # built | up-to-date
    image_id: str = ""
    checks: list[str] = field(default_factory=list)  # each check and how it went
    pushed: list[str] = field(default_factory=list)
    seconds: float = 0.0


def build_project(engine: Engine, plan: ProjectPlan, settings: BuildSettings, log: Log) -> ProjectOutcome:
    """`settings`: the base's (repository, output folder, --push); the base image must be there (built or up to
    date) under its immutable tag."""
    outcome = ProjectOutcome(plan.ref(settings.repo))
    folder = settings.out_dir / PROJECT_DIR
    write_context(plan, folder, force=settings.force)
    local = engine.inspect(outcome.ref)
    if local is not None and local.labels.get(PROJECT_CONTENT_LABEL) == plan.content_id:
        outcome.image_id, outcome.status = local.id, Status.UP_TO_DATE
        log(f"[project] {outcome.ref} is up to date locally: no build")
    else:
        with secret_files(plan.base, settings, True) as files:
            _build(engine, plan, settings, outcome, log, files)
        run_checks(engine, plan, outcome, log)
        check_cancelled("tagging")
        engine.tag(outcome.image_id, outcome.ref)
        outcome.status = Status.BUILT
        log(f"[project] tagged {outcome.ref}")
    if settings.push:
        check_cancelled("pushing")
        digest = engine.push(outcome.ref, settings.auth, lambda line: None)
        outcome.pushed.append(outcome.ref)
        log(f"[project] pushed {outcome.ref} ({digest})")
    return outcome


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
    start = time.monotonic()
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
        outcome.checks.append(f"import: not checked ({plan.imports_from})")
        log(f"[project] import check: not checked ({plan.imports_from})")
    for what, command in plan.checks():
        check_cancelled("the project's checks")
        result = engine.run(outcome.image_id, list(command), timeout=CHECK_TIMEOUT)
        if result.timed_out or result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exit {result.exit_code}"
            raise BuildError(f"[project] check `{what}` failed ({why}), nothing tagged: {_tail(result.output)}")
        outcome.checks.append(f"{what}: passed")
        log(f"[project] {what}: passed")


def _tail(output: str) -> str:
    lines = [line.strip() for line in redact(output).splitlines() if line.strip()]
    return " | ".join(lines[-TAIL_LINES:]) or "no output"
