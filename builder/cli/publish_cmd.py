"""`torchyard publish` and `torchyard matrix publish`: the publish set, built or listed (`matrix ci`: ci_cmd.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from builder.cli.gate_flags import check_gate_flags, gate_options, security_gate
from builder.cli.image_options import lock_of, locked_option, refresh_option, registry_mirror_option
from builder.cli.options import folder, matrix_of, publish_note, publish_set_option, repository
from builder.cli.output import document, emit_json, table
from builder.cli.registry_flags import registry_auth, registry_options
from builder.cli.request import takes
from builder.cli.trust_flags import trust_options, trust_settings
from builder.core.errors import BuildError, TorchyardError, UsageError
from builder.core.files import check_writable, write_report_file
from builder.core.kinds import Platform, parse_gpus, parse_platform
from builder.core.provenance import provenance_labels, source_date_epoch
from builder.core.redact import redact
from builder.engine import RegistryAuth
from builder.matrix.model import Matrix
from builder.publish.items import Excluded, Item, expand, on_platforms, select
from builder.publish.plan import PublishPlan, plan_publish
from builder.render.network import Network, NetworkFlags, resolve_network

if TYPE_CHECKING:  # publish.run is imported where a command runs: --help stays fast
    from builder.pipeline.gate import SecurityGate
    from builder.publish.report import Report
    from builder.publish.run import PublishSettings
    from builder.trust.attest import TrustSettings

DEFAULT_REPO = "torchyard"


def _platforms(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[Platform, ...]:
    return tuple(dict.fromkeys(parse_platform(part) for part in value.split(","))) if value else ()


@dataclass(frozen=True, kw_only=True)
class PublishFlags:
    """`torchyard publish`'s flags, checked before the matrix is read."""

    only: tuple[str, ...]
    repo: str
    gpus: str | None
    jobs: int
    dry_run: bool
    plan: bool
    size_budget: float
    allow_growth: bool
    no_build_tags: bool
    no_push: bool
    no_aliases: bool
    aliases_only: bool
    report_path: str | None
    notes_path: str | None
    output: str
    registry_user: str | None
    registry_password_stdin: bool
    refresh: str
    locked: bool
    relock: bool
    registry_mirror: str | None
    platforms: tuple[Platform, ...]
    sign_key: Path | None
    attest: bool
    zstd: bool
    security_gate: bool
    allowlist: str | None

    def __post_init__(self) -> None:
        if self.zstd and self.no_push:
            raise UsageError("--zstd writes zstd copies in the registry: it cannot go with --no-push")
        check_gate_flags(self.security_gate, self.allowlist)
        if self.plan and (self.dry_run or self.no_push or self.aliases_only):
            raise UsageError("--plan asks the registry what a publish would do: not with --dry-run, --no-push or "
                             "--aliases-only")  # fmt: skip
        if self.notes_path and (self.plan or self.dry_run):
            raise UsageError("--notes writes what a publish did: not with --plan or --dry-run (--plan prints Markdown)")
        if self.jobs < 1:
            raise UsageError(f"--jobs: {self.jobs} is not a positive number")
        parse_gpus(self.gpus)
        if self.aliases_only and (self.no_aliases or self.no_push):
            raise UsageError(
                "--aliases-only moves aliases in the registry: it cannot go with --no-aliases or --no-push"
            )


platform_option = click.option(
    "--platform",
    "platforms",
    metavar="linux/amd64[,linux/arm64]",
    callback=_platforms,
    help="Only the images of these platforms (default: every platform the entries list); the other platforms "
    "of a multi-platform image must already be published for its index to be written.",
)


@click.command("publish")
@click.option("--only", "only", multiple=True, metavar="GLOB", help="Items whose id matches (repeatable).")
@click.option("--repo", default=DEFAULT_REPO, show_default=True, metavar="REGISTRY/NAME", callback=repository)
@click.option("--gpus", metavar="all|N|none", help="Also run the smoke suite's GPU checks.")
@click.option("--jobs", default=1, show_default=True, type=int, help="Groups built in parallel.")
@click.option("--dry-run", is_flag=True, help="List what would be built and pushed.")
@click.option("--plan", is_flag=True, help="Ask the registry what would build, skip and move (each alias from digest "
              "to digest), as Markdown; --report FILE also writes it as JSON. Builds and pushes nothing.")  # fmt: skip
@click.option("--size-budget", default=5.0, show_default=True, metavar="PERCENT", type=click.FloatRange(min=0),
              help="Hold an alias (and fail the run) when its new image's compressed size grew past this over the "
              "image it named before.")  # fmt: skip
@click.option("--allow-growth", is_flag=True, help="Move aliases whatever their images grew by (said in the log).")
@click.option("--no-build-tags", is_flag=True, help="Give pushed images no never-rewritten <tag>-<YYYYMMDD> build tag "
              "(docs/tags.md).")  # fmt: skip
@click.option("--no-push", is_flag=True, help="Build, smoke-test and tag locally only.")
@click.option("--no-aliases", is_flag=True, help="Leave the floating aliases where they are (CI fan-out).")
@click.option("--aliases-only", is_flag=True, help="Build nothing; move the aliases of published images.")
@click.option(
    "--zstd", is_flag=True, help="Also write a zstd copy of each pushed tag under <tag>-zstd (gzip stays the default)."
)
@click.option("--report", "report_path", metavar="FILE", help="Write a JSON report.")
@click.option("--notes", "notes_path", metavar="FILE", help="Write Markdown release notes: each published image, its "
              "digest and build tag, and what a --refresh changed, package by package.")  # fmt: skip
@click.option("-o", "--output", "output", default="build/publish", show_default=True, metavar="DIR", callback=folder)
@registry_options
@refresh_option
@locked_option
@click.option("--relock", is_flag=True, help="Resolve matrix.lock from the registries first, then build --locked.")
@registry_mirror_option
@platform_option
@trust_options
@gate_options
@publish_set_option
@click.pass_context
@takes(PublishFlags)
def publish_cmd(ctx: click.Context, flags: PublishFlags) -> None:
    """Build, smoke-test and push the publish set; aliases move only after their images passed."""
    from builder.publish.report import PublishInterrupted
    from builder.publish.run import publish

    m = matrix_of(ctx, publish_set=True)
    publish_note(m)
    trust = trust_settings(flags.sign_key, flags.attest, not flags.no_push, m.path)  # a bad key: nothing built
    network = resolve_network(NetworkFlags())
    if flags.relock:
        from builder.cli.upstream_cmd import relock as write_lock

        write_lock(m, click.echo)
    every, excluded = expand(m, network, flags.refresh, lock_of(m, flags.locked or flags.relock), flags.registry_mirror)
    items = on_platforms(select(every, flags.only), flags.platforms)
    report_file = check_writable(flags.report_path, "--report") if flags.report_path else None  # not after builds
    notes_file = check_writable(flags.notes_path, "--notes") if flags.notes_path else None
    auth = registry_auth(flags.registry_user, flags.registry_password_stdin)  # a dry run checks what a real run would
    pplan = plan_publish(m, items, excluded if not (flags.only or flags.platforms) else [], every)
    gate = security_gate(flags.security_gate, flags.allowlist)  # a bad allowlist is refused by a dry run too
    if flags.dry_run:
        _dry_run(pplan, flags.repo)
        return
    if flags.plan:
        _preview(pplan, flags.repo, auth, report_file)
        return
    click.echo(f"publishing {len(items)} image(s) to {flags.repo} ({flags.jobs} job(s); logs under {flags.output}/)")
    try:
        report = publish(pplan, _settings(flags, m, network, auth, trust, gate), click.echo)
    except PublishInterrupted as stopped:  # the report is written on this exit too
        _finish(stopped.report, report_file, notes_file)
        raise
    except TorchyardError as exc:  # and on this one (a registry refusing pushes, found before any build: exit 5)
        _finish(_stopped(pplan, exc), report_file, notes_file)
        raise
    _finish(report, report_file, notes_file)
    if report.failed:  # an image failed its build or smoke suite: the README's code for that (the rest went on)
        raise SystemExit(BuildError.exit_code)


def _settings(
    flags: PublishFlags,
    m: Matrix,
    network: Network,
    auth: RegistryAuth | None,
    trust: TrustSettings | None,
    gate: SecurityGate | None,
) -> PublishSettings:
    from builder.publish.run import PublishSettings

    return PublishSettings(
        repo=flags.repo,
        out_root=Path(flags.output),
        jobs=flags.jobs,
        gpus=flags.gpus,
        push=not flags.no_push,
        aliases=not flags.no_aliases,
        aliases_only=flags.aliases_only,
        zstd=flags.zstd,
        auth=auth,
        pip_conf=network.pip_conf() if network.wants_pip_conf() else None,
        provenance=tuple(sorted(provenance_labels(Path(m.path).parent).items())),
        trust=trust,
        security_gate=gate,
        epoch=source_date_epoch(),
        size_budget=None if flags.allow_growth else flags.size_budget,
        build_tags=not flags.no_build_tags,
    )


def _stopped(pplan: PublishPlan, error: TorchyardError) -> Report:
    """The report of a run an error stopped before its end: no item published by it, every alias held."""
    from builder.core.kinds import AliasStatus, Status
    from builder.publish.report import AliasResult, ItemResult, Report

    why = f"the run stopped: {redact(str(error)).splitlines()[0]}"
    items = [ItemResult(i.id, Status.FAILED, reason=why) for i in pplan.items]
    items += [ItemResult(e.id, Status.EXCLUDED, reason=e.reason) for e in pplan.excluded]
    return Report(items, [AliasResult(a.alias, AliasStatus.HELD, reason=why) for a in pplan.aliases], 0.0)


def _finish(report: Report, report_file: Path | None, notes_file: Path | None) -> None:
    """The JSON report and the release notes where asked for, then the summary."""
    from builder.publish.notes import write_notes
    from builder.publish.report import write_report

    if report_file is not None:
        write_report(report, report_file)
    if notes_file is not None:
        write_notes(report, notes_file)
    _print_report(report)


def _print_report(report: Report) -> None:
    from builder.publish.report import pushed_text

    click.echo("")
    rows = [[i.id, i.status, f"{i.seconds:.0f}", pushed_text(i), _first_line(i.reason or i.ref)] for i in report.items]
    click.echo(table(["ITEM", "STATUS", "SECONDS", "PUSHED", "REASON / REF"], rows))
    for index in report.indexes:
        click.echo(f"index {index.tag}: {index.status}" + (f" ({_first_line(index.reason)})" if index.reason else ""))
    build_refs = [i.build_tag for i in report.items] + [i.build_tag for i in report.indexes]
    for build_ref in filter(None, build_refs):
        click.echo(f"build tag {build_ref} (never rewritten)")
    for ref, why in report.untagged.items():
        click.echo(f"no build tag for {ref}: {_first_line(why)}")
    for alias in report.aliases:
        click.echo(
            f"alias {alias.alias}: {alias.status}"
            + (f" -> {alias.target}" if alias.target else "")
            + (f" ({alias.reason})" if alias.reason else "")
        )
    for copy in report.zstd:
        click.echo(f"zstd {copy.tag}: {copy.status}" + (f" ({_first_line(copy.reason)})" if copy.reason else ""))


def _dry_run(pplan: PublishPlan, repo: str) -> None:
    """What would be pushed, tag by tag, and the aliases that would move once everything passed."""
    rows = []
    for group in pplan.groups:
        for item in group.items:
            if group.plan is None:
                rows.append([item.id, f"cannot plan: {_first_line(group.problem)}", ""])
                continue
            tags = group.plan.target(item.flavor).tags
            aliases = "(its index's)" if item.entry.multi_platform else ", ".join(tags.aliases)
            rows.append([item.id, f"{repo}:{group.immutable(item)}", aliases])
    click.echo(table(["ITEM", "IMAGE", "ALIASES (moved last)"], rows))
    for index in pplan.indexes:
        listed = ", ".join(m.tag for m in index.members)
        what = f"{', '.join(index.tags.all())} over {listed}" if index.tags else f"cannot plan: {index.problem}"
        click.echo(f"index {index.id}: {what}")
    for e in pplan.excluded:
        click.echo(f"excluded {e.id} ({e.entry}): {e.reason}")


def _preview(pplan: PublishPlan, repo: str, auth: RegistryAuth | None, report_file: Path | None) -> None:
    from builder.pipeline.registry import Registry
    from builder.publish.preview import preview

    found = preview(pplan, Registry(auth), repo)
    if report_file is not None:
        write_report_file(report_file, redact(json.dumps(found.as_json(), indent=2)) + "\n")
    click.echo(found.markdown(), nl=False)


def _first_line(text: str) -> str:
    return redact(text).splitlines()[0][:110] if text else ""


def _list(items: list[Item], excluded: list[Excluded], *, as_json: bool) -> None:
    if as_json:
        listed = {
            "items": [{"id": i.id, "entry": i.entry.name} for i in items],
            "excluded": [{"id": e.id, "entry": e.entry, "reason": e.reason} for e in excluded],
        }
        emit_json(document(listed, total_of="items"))
        return
    click.echo(table(["ITEM", "ENTRY"], [[i.id, i.entry.name] for i in items]))
    for e in excluded:
        click.echo(f"excluded {e.id} ({e.entry}): {e.reason}")


@click.command("publish")
@click.option("--only", "only", multiple=True, metavar="GLOB")
@click.option("--json", "as_json", is_flag=True)
@publish_set_option
@click.pass_context
def matrix_publish_cmd(ctx: click.Context, /, only: tuple[str, ...], as_json: bool) -> None:
    """List the publish set's items (and what it names but cannot build, with why)."""
    m = matrix_of(ctx, publish_set=True)
    publish_note(m)
    items, excluded = expand(m)
    _list(select(items, only), [e for e in excluded if not only], as_json=as_json)
