"""`torchyard lookup` and `torchyard explain`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from builder.cli.lookup_view import best_block, grouped_table, groups, image_ref, pip_line, wide_table
from builder.cli.options import combination_options, here_option, matrix_of, query_of
from builder.cli.output import emit_json
from builder.core.errors import NoMatchError, UsageError
from builder.matrix.model import Matrix
from builder.resolve.choose import SHOWN_REASONS, failure_message
from builder.resolve.facts import Facts
from builder.resolve.report import explanation_json, result_json
from builder.resolve.resolver import Lookup, explain, lookup

SCHEMA = 1


@click.command("lookup")
@combination_options
@here_option
@click.option("--limit", default=10, show_default=True, metavar="N", type=int, help="Rows to show (0: all).")
@click.option("--wide", is_flag=True, help="One row per combination, every column.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/schemas.md).")
@click.pass_context
def lookup_cmd(ctx: click.Context, /, limit: int, wide: bool, as_json: bool, here: bool, **kwargs: Any) -> None:
    """Valid combinations for a driver / GPU / version request, best first, and why the rest fail."""
    if limit < 0:
        raise UsageError(f"--limit: {limit} is negative (0 shows every row)")
    m = matrix_of(ctx)
    q = query_of(m, kwargs, here=here)
    found = lookup(m, q)
    if as_json:
        emit_json(lookup_json(m, found, limit))
        if not found.valid:
            raise SystemExit(NoMatchError.exit_code)
        return
    if not found.valid:
        raise NoMatchError(failure_message(found))
    click.echo(best_block(m, found.valid[0]) + "\n")
    driver, arch = q.driver is not None, bool(q.archs)
    if wide:
        rows: Sequence[object] = found.valid[:limit] if limit else found.valid
        click.echo(wide_table(found.valid[:limit] if limit else found.valid, driver=driver, arch=arch))
        total, unit = len(found.valid), "combinations"
    else:
        builds = groups(found.valid)
        rows = builds[:limit] if limit else builds
        click.echo(grouped_table(builds[:limit] if limit else builds, driver=driver, arch=arch))
        total, unit = len(builds), f"torch builds ({len(found.valid)} combinations)"
    more = total - len(rows)
    click.echo(
        f"\n{total} valid {unit}"
        + (f", {more} more: --limit 0" if more else "")
        + f"; {len(found.rejected)} combinations ruled out"
        + (":" if found.rejected else ".")
    )
    for reason, count in found.reasons()[:SHOWN_REASONS]:
        click.echo(f"  {count:5d}  {reason}")


def lookup_json(m: Matrix, found: Lookup, limit: int) -> dict[str, Any]:
    f = Facts(m)
    shown = found.valid[:limit] if limit else found.valid
    return {
        "schema": SCHEMA,
        "total": len(found.valid),
        "shown": len(shown),
        "results": [result_json(f, r) | {"image": image_ref(m, r), "pip": pip_line(r)} for r in shown],
        "rejected": len(found.rejected),
        "reasons": [{"reason": reason, "count": count} for reason, count in found.reasons()],
    }


@click.command("explain")
@combination_options
@here_option
@click.option("--json", "as_json", is_flag=True, help='Print {"valid": bool, "checks": [...]}.')
@click.pass_context
def explain_cmd(ctx: click.Context, /, as_json: bool, here: bool, **kwargs: Any) -> None:
    """Every rule for the combination lookup picks first (or the nearest candidate), with sources."""
    m = matrix_of(ctx)
    e = explain(m, query_of(m, kwargs, here=here))
    if as_json:
        emit_json({"schema": SCHEMA} | explanation_json(e))
    else:
        click.echo(f"{e.id}: {'VALID' if e.valid else 'NOT VALID'}")
        for how in e.pinned:
            click.echo(f"  chosen: {how}")
        for c in e.checks:
            click.echo(f"  {'PASS' if c.ok else 'FAIL'}  {c.rule:<16} {c.reason}")
            if not c.ok:
                for source in c.sources:
                    if source in m.sources:
                        click.echo(f"        {'':<16} source: {m.sources[source].url}")
    if not e.valid:
        raise SystemExit(1)
