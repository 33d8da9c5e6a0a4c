"""`torchyard lookup` and `torchyard explain`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from builder.cli.lookup_view import (
    best_block,
    grouped_table,
    groups,
    image_ref,
    lifecycle_lines,
    offer_for,
    pip_line,
    unrecorded_note,
    wide_table,
)
from builder.cli.options import (
    HOST,
    combination_options,
    here_option,
    inference_options,
    matrix_of,
    query_of,
    repository,
)
from builder.cli.output import emit_json
from builder.cli.request import takes
from builder.core import env
from builder.core.errors import NoMatchError, UsageError
from builder.host.locate import Location, location_json, where_lines
from builder.matrix.model import Matrix
from builder.resolve.choose import SHOWN_REASONS, failure_message
from builder.resolve.facts import Facts
from builder.resolve.report import explanation_json, result_json, verdict_json
from builder.resolve.resolver import Lookup, explain, lookup
from builder.resolve.verdict import status_words, verdict

SCHEMA = 2  # 2: a check's `status` (pass|fail|not-checked); `ok` is null when not checked; `verdict`


@dataclass(frozen=True, kw_only=True)
class LookupFlags:
    """`torchyard lookup`'s own flags; `shared` holds the combination flags (query_of reads them)."""

    limit: int
    wide: bool
    as_json: bool
    here: bool
    repo: str | None
    shared: dict[str, Any]

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise UsageError(f"--limit: {self.limit} is negative (0 shows every row)")


@click.command("lookup")
@combination_options
@inference_options
@here_option
@click.option("--limit", default=10, show_default=True, metavar="N", type=int, help="Rows to show (0: all).")
@click.option("--wide", is_flag=True, help="One row per combination, every column.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/schemas.md).")
@click.option(
    "--repo",
    metavar="REGISTRY/NAME",
    envvar=env.REPO,
    callback=repository,
    help=f"With --here: the team's repository, where the first row's image is looked for (${env.REPO}).",
)
@click.pass_context
@takes(LookupFlags)
def lookup_cmd(ctx: click.Context, flags: LookupFlags) -> None:
    """Valid combinations for a driver / GPU / version request, best first, and why the rest fail."""
    m = matrix_of(ctx)
    q = query_of(m, dict(flags.shared), here=flags.here)
    found = lookup(m, q)
    where = _where(ctx, m, found, flags.repo, q.inference) if flags.here and found.valid else None
    if flags.as_json:
        listed = lookup_json(m, found, flags.limit, inference=q.inference)
        notes = (
            [line.split("note:", 1)[1].strip() for line in lifecycle_lines(m, q, found.valid[0])] if found.valid else []
        )
        emit_json(listed | {"lifecycle": notes} | ({"where": location_json(where)} if where else {}))
        if not found.valid:
            raise SystemExit(NoMatchError.exit_code)
        return
    if not found.valid:
        raise NoMatchError(failure_message(found))
    best = found.valid[0]
    click.echo(best_block(m, best, here=flags.here, offer=offer_for(m, best, inference=q.inference)))
    click.echo("".join(f"{line}\n" for line in lifecycle_lines(m, q, best)), nl=False)
    click.echo("".join(f"  where:  {line}\n" for line in (where_lines(where) if where else [])))
    _print_rows(found, flags, driver=q.driver is not None, arch=bool(q.archs))


def _print_rows(found: Lookup, flags: LookupFlags, *, driver: bool, arch: bool) -> None:
    """The table (grouped by torch build, or --wide), the count, the reasons the rest were ruled out."""
    limit = flags.limit
    if flags.wide:
        shown = list(found.valid[:limit] if limit else found.valid)
        click.echo(wide_table(shown, driver=driver, arch=arch))
        total, count, unit = len(found.valid), len(shown), "combinations"
    else:
        builds = groups(found.valid)
        rows = builds[:limit] if limit else builds
        click.echo(grouped_table(rows, driver=driver, arch=arch))
        shown = [g.first for g in rows]
        total, count, unit = len(builds), len(rows), f"torch builds ({len(found.valid)} combinations)"
    more = total - count
    click.echo(
        f"\n{total} valid {unit}"
        + (f", {more} more: --limit 0" if more else "")
        + f"; {len(found.rejected)} combinations ruled out"
        + (":" if found.rejected else ".")
    )
    for reason, count in found.reasons()[:SHOWN_REASONS]:
        click.echo(f"  {count:5d}  {reason}")
    note = unrecorded_note(shown)
    if note:
        click.echo(note)


def _where(ctx: click.Context, m: Matrix, found: Lookup, repo: str | None, inference: bool) -> Location:
    """Where lookup --here's first row can be had: the locator doctor uses (the local engine, the team's registry
    repository, else another local image that runs here)."""
    from builder.engine.quick import QuickEngine
    from builder.host.doctor import judge_here
    from builder.host.locate import Wanted, engine_images, expected_size, locate, registry_of

    r = found.valid[0]
    c, offer = r.combo, offer_for(m, r, inference=inference)
    size = expected_size(str(c.torch.version), c.variant.name, c.platform.value)
    build = best_block(m, r, offer=offer).split("  build:  ", 1)[1].splitlines()[0]
    tag = image_ref(m, r, offer=offer).rpartition(":")[2]
    wanted = Wanted(c.id, tag, c.platform.value, build, size, offer.flavor.value)
    judge = judge_here(m, ctx.meta[HOST])
    return locate(wanted, judge, local=engine_images(QuickEngine()), repo=registry_of(repo))


def lookup_json(m: Matrix, found: Lookup, limit: int, *, inference: bool = False) -> dict[str, Any]:
    f = Facts(m)
    shown = found.valid[:limit] if limit else found.valid
    offers = [offer_for(m, r, inference=inference) for r in shown]
    return {
        "schema": SCHEMA,
        "total": len(found.valid),
        "shown": len(shown),
        "results": [
            result_json(f, r) | {"image": image_ref(m, r, offer=o), "pip": pip_line(r, o)} | verdict_json(r.checks)
            for r, o in zip(shown, offers, strict=True)
        ],
        "rejected": len(found.rejected),
        "reasons": [{"reason": reason, "count": count} for reason, count in found.reasons()],
    }


@click.command("explain")
@combination_options
@inference_options
@here_option
@click.option("--json", "as_json", is_flag=True, help='Print {"valid": bool, "checks": [...]}.')
@click.pass_context
def explain_cmd(ctx: click.Context, /, as_json: bool, here: bool, **kwargs: Any) -> None:
    """Every rule for the combination lookup picks first (or the nearest candidate), with sources."""
    m = matrix_of(ctx)
    e = explain(m, query_of(m, kwargs, here=here))
    v = verdict(e.checks, here=here)
    if as_json:
        emit_json({"schema": SCHEMA} | explanation_json(e, here=here))
    else:
        click.echo(f"{e.id}: {v.words}")
        for how in e.pinned:
            click.echo(f"  chosen: {how}")
        for c in e.checks:
            click.echo(f"  {status_words(c):<11}  {c.rule:<16} {c.reason}")
            if not c.ok:
                for source in c.sources:
                    if source in m.sources:
                        click.echo(f"  {'':<11}  {'':<16} source: {m.sources[source].url}")
        for line in v.unknown:
            click.echo(f"  to tell: {line}")
    if v.exit_code:
        raise SystemExit(v.exit_code)
