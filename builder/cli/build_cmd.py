"""`torchyard build`: render, build the targets, verify, run the smoke suite, tag, optionally push."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from builder.cli.common import image_command_options, prepare
from builder.cli.gate_flags import check_gate_flags, gate_options, security_gate
from builder.cli.options import repository
from builder.cli.registry_flags import registry_auth, registry_options
from builder.cli.request import takes
from builder.cli.trust_flags import trust_options, trust_settings
from builder.core.errors import BuildError, TorchyardError, UsageError
from builder.core.kinds import AliasStatus, Flavor, Status, parse_gpus
from builder.core.progress import mode_for
from builder.core.provenance import provenance_labels, source_date_epoch
from builder.core.stage_times import describe
from builder.engine import DockerEngine, build_command
from builder.pipeline.context_dir import check_output
from builder.pipeline.hygiene_allowlist import Accepted, read_hygiene_allowlist
from builder.pipeline.multiplatform import build_platforms, index_tags
from builder.pipeline.pipeline import BuildSettings, Outcome, build
from builder.pipeline.plan import Plan, build_request, plan_json, tag_refs
from builder.pipeline.project_build import PROJECT_DIR, ProjectOutcome, build_project, project_report
from builder.pipeline.project_plan import ProjectPlan, project_json, project_request
from builder.pipeline.request import Chosen
from builder.render.tags import member_tag


@dataclass(frozen=True, kw_only=True)
class BuildFlags:
    """`torchyard build`'s own flags; the combination and image flags it shares with render go on to prepare()."""

    target: str
    repo: str
    push: bool
    registry_user: str | None
    registry_password_stdin: bool
    gpus: str | None
    output: str | None
    force: bool
    dry_run: bool
    verbose: bool
    sign_key: Path | None
    attest: bool
    security_gate: bool
    allowlist: str | None
    shared: Mapping[str, Any]
    hygiene_allowlist: str | None = None
    cache: str | None = None  # a registry repository, checked by the reference grammar (options.repository)
    accepted: tuple[Accepted, ...] = field(init=False)  # --hygiene-allowlist's entries, read once here

    def __post_init__(self) -> None:
        parse_gpus(self.gpus)
        check_gate_flags(self.security_gate, self.allowlist)
        path = self.hygiene_allowlist
        object.__setattr__(self, "accepted", read_hygiene_allowlist(path) if path else ())


def cache_repository(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--cache: a repository alone; the tag is torchyard's (one per target: builder/pipeline/plan.py cache_tag)."""
    if value and ":" in value.rsplit("/", 1)[-1]:
        raise UsageError(f"--cache: {value!r} names a tag; give the repository alone (torchyard tags it per target)")
    return repository(ctx, param, value)


@click.command("build")
@image_command_options
@click.option("--push", is_flag=True, help="Push the tags after the smoke suite passed.")
@registry_options
@click.option("--gpus", metavar="all|N|none", help="Also run the smoke suite's GPU checks on these GPUs.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the commands; build nothing.")
@click.option("--verbose", is_flag=True, help="Stream the whole build output.")
@click.option(
    "--cache",
    metavar="REGISTRY/NAME",
    callback=cache_repository,
    help="Registry build cache (buildx): read each step's cache from REGISTRY/NAME:<combination>-<flavor> and write "
    "every stage's back (mode=max); engines sharing it reuse each other's steps.",
)
@trust_options
@gate_options
@click.option(
    "--hygiene-allowlist",
    metavar="FILE",
    help="The hygiene checks' accepted exceptions, each with an expiry date (docs/contract.md).",
)
@click.pass_context
@takes(BuildFlags)
def build_cmd(ctx: click.Context, flags: BuildFlags) -> None:
    """Build (and verify, smoke-test, tag, push) images for the best or pinned combination."""
    auth = registry_auth(flags.registry_user, flags.registry_password_stdin)  # a dry run checks what a real run would
    m, options, chosen = prepare(ctx, dict(flags.shared), flags.target, dry_run=flags.dry_run)
    trust = trust_settings(flags.sign_key, flags.attest, flags.push, m.path)  # a bad key stops here: nothing built
    gate = security_gate(flags.security_gate, flags.allowlist)  # a bad allowlist too, dry run or not
    plan = chosen.plan
    provenance = tuple(sorted(provenance_labels(Path(m.path).parent).items()))
    out_dir = Path(flags.output or f"build/torchyard/{plan.id}")
    platforms = f" for {', '.join(p.combination.platform.value for p in chosen.plans)}" if chosen.more else ""
    click.echo(chosen.choice.describe() + platforms)
    if flags.dry_run:
        _dry_runs(chosen, flags, out_dir, provenance)
        return
    settings = BuildSettings(
        repo=flags.repo,
        flavors=chosen.flavors,
        out_dir=out_dir,
        push=flags.push,
        gpus=flags.gpus,
        verbose=flags.verbose,
        auth=auth,
        pip_conf=options.network.pip_conf() if options.network.wants_pip_conf() else None,
        force=flags.force,
        provenance=provenance,
        progress=mode_for(),
        trust=trust,
        security_gate=gate,
        epoch=source_date_epoch(),
        hygiene=flags.accepted,
        cache=flags.cache,
    )
    if chosen.more:
        _build_platforms(chosen.plans, settings)
        return
    _build_one(chosen, settings)


def _build_one(chosen: Chosen, settings: BuildSettings) -> None:
    """One platform's images, then (in a project) the project's image over them; the report and the summary."""
    engine, plan, out_dir = DockerEngine(), chosen.plan, settings.out_dir
    outcomes = build(engine, plan, settings, click.echo)
    data = plan_json(plan, settings.repo, out_dir) | project_json(chosen.project, settings.repo, out_dir / PROJECT_DIR)
    (out_dir / "plan.json").write_text(json.dumps(data, indent=2) + "\n")
    (out_dir / "build-report.json").write_text(json.dumps(build_report(outcomes), indent=2) + "\n")
    project = None if chosen.project is None else _project(engine, chosen.project, settings, outcomes)
    _summary(outcomes)
    if project is not None:
        seconds = f"{project.seconds:.0f}s" if project.status is Status.BUILT else ""
        pushed = f", pushed {len(project.pushed)} tag(s)" if project.pushed else ""
        click.echo(f"{'project':8} {project.status:11} {project.ref} {seconds}{pushed}".rstrip())


def _project(
    engine: DockerEngine, plan: ProjectPlan, settings: BuildSettings, outcomes: list[Outcome]
) -> ProjectOutcome:
    """The project's image over the base; build-report.json then describes it beside the base (failed: why)."""
    report = settings.out_dir / "build-report.json"
    try:
        done = build_project(engine, plan, settings, click.echo)
    except TorchyardError as exc:
        failed = build_report(outcomes) | {"project": project_report(plan, settings.repo, None, str(exc))}
        report.write_text(json.dumps(failed, indent=2) + "\n")
        raise
    ok = build_report(outcomes) | {"project": project_report(plan, settings.repo, done)}
    report.write_text(json.dumps(ok, indent=2) + "\n")
    return done


def _dry_runs(chosen: Chosen, flags: BuildFlags, out_dir: Path, provenance: tuple[tuple[str, str], ...]) -> None:
    """--dry-run: each platform's plan and commands, then the indexes a multi-platform push would write."""
    check_output(out_dir, flags.force)  # what the real run would refuse
    for each in chosen.plans:
        folder = out_dir / each.combination.platform.arch if chosen.more else out_dir
        _dry_run(each, chosen.flavors, flags, folder, provenance, member=bool(chosen.more))
    if chosen.project is not None:
        _dry_run_project(chosen.project, flags, out_dir / PROJECT_DIR, provenance)
    if chosen.more and flags.push:
        click.echo("\nthen, when every platform passed, one image index per flavor under the platform-free tags:")
        for flavor in chosen.flavors:
            tags = index_tags({p.combination.platform: p.target(flavor).tags for p in chosen.plans})
            click.echo(f"  {', '.join(f'{flags.repo}:{t}' for t in tags.all())}")


def _build_platforms(plans: tuple[Plan, ...], settings: BuildSettings) -> None:
    """--platform A,B: each platform's image, then (with --push) one index per flavor; exit 4 when a platform
    failed or an index was held."""
    run = build_platforms(DockerEngine(), plans, settings, click.echo)
    for plan in plans:
        folder = settings.out_dir / plan.combination.platform.arch
        if folder.is_dir():
            (folder / "plan.json").write_text(json.dumps(plan_json(plan, settings.repo, folder), indent=2) + "\n")
            outcomes = run.outcomes.get(plan.combination.platform, [])
            (folder / "build-report.json").write_text(json.dumps(build_report(outcomes), indent=2) + "\n")
    click.echo("")
    for platform, outcomes in run.outcomes.items():
        for o in outcomes:
            click.echo(f"{platform.value:12} {o.flavor.value:8} {o.status:11} {o.ref}")
    for platform, reason in run.failed.items():
        click.echo(f"{platform.value:12} failed: {reason.splitlines()[0]}")
    for index in run.indexes:
        detail = index.reason or ", ".join(f"{p} {d[:19]}" for p, d in (index.members or {}).items())
        click.echo(f"index        {index.status:11} {settings.repo}:{index.tag} {detail}".rstrip())
    if not run.ok:
        held = [i.tag for i in run.indexes if i.status is AliasStatus.HELD]
        failed = ", ".join(p.value for p in run.failed) or "no platform"
        raise BuildError(f"{failed} failed; held: {', '.join(held) or 'no index (no --push)'}")


def _dry_run(
    plan: Plan,
    flavors: tuple[Flavor, ...],
    flags: BuildFlags,
    out_dir: Path,
    provenance: tuple[tuple[str, str], ...],
    *,
    member: bool = False,
) -> None:
    if member:
        click.echo(f"\n== {plan.combination.platform.value} ({plan.id})")
    # a dry run writes nothing: the path is where a build would write it (render -o DIR writes it now)
    click.echo(
        f"Dockerfile: {out_dir / 'Dockerfile'} when built (sha256 {plan.dockerfile_sha256[:16]}...; not written)"
    )
    click.echo(f"content hash: {plan.content_hash}")
    for origin in plan.network_origins:
        click.echo(f"network: {origin}")
    for secret in plan.secrets:
        click.echo(f"secret {secret.id}: {secret.description} (from {secret.source})")
    placeholders = {s.id: "<generated 0600 file>" for s in plan.secrets if s.source == "generated"}
    for flavor in flavors:
        target = plan.target(flavor)
        click.echo(f"\n[{flavor.value}]")
        request = build_request(
            plan, flavor, out_dir, flags.repo, placeholders, tags=False, provenance=provenance, cache=flags.cache
        )
        click.echo("  " + shlex.join(build_command(request, buildx=request.cache is not None)))  # a cache: buildx
        click.echo("  then: label check, smoke suite (no-GPU checks), tag check, then tag:")
        refs = [f"{flags.repo}:{member_tag(target.tags.immutable, plan.combination.platform)}"] if member else []
        for ref in refs or tag_refs(flags.repo, target):
            click.echo(f"    {ref}")
        if flags.push:
            click.echo("  then push (immutable tag first, then aliases), skipped where the registry has this hash")


def _dry_run_project(
    plan: ProjectPlan, flags: BuildFlags, folder: Path, provenance: tuple[tuple[str, str], ...]
) -> None:
    """The project image's build over the base image (its smoke suite is the base's), its checks, its tag."""
    click.echo(f"\n[project] {plan.name} over {plan.base_ref(flags.repo)} (content id {plan.content_id[:12]}...)")
    placeholders = {s.id: "<generated 0600 file>" for s in plan.base.secrets if s.source == "generated"}
    click.echo("  " + shlex.join(build_command(project_request(plan, folder, flags.repo, placeholders, provenance))))
    checks = ", ".join(what for what, _ in plan.checks()) or "none"
    unchecked = "" if plan.imports else f" (import: not checked: {plan.imports_from})"
    click.echo(f"  then: the project's checks: {checks}{unchecked}, then tag:")
    click.echo(f"    {plan.ref(flags.repo)}")
    if flags.push:
        click.echo("  then push, skipped where the registry holds this content id already")


def _summary(outcomes: list[Outcome]) -> None:
    click.echo("")
    for o in outcomes:
        detail = f"{o.seconds:.0f}s ({describe(o.stages)})" if o.status is Status.BUILT else ""
        pushed = f", pushed {len(o.pushed)} tag(s)" if o.pushed else ""
        click.echo(f"{o.flavor.value:8} {o.status:11} {o.ref} {detail}{pushed}")


def build_report(outcomes: list[Outcome]) -> dict[str, Any]:
    """<out>/build-report.json: per target its status, the build's wall time and each stage's (docs/schemas.md)."""
    return {
        "schema": 1,
        "targets": {
            o.flavor.value: {
                "ref": o.ref,
                "status": o.status.value,
                "seconds": round(o.seconds, 1),
                "stages": o.stages,
                "pushed": o.pushed,
            }
            for o in outcomes
        },
    }
