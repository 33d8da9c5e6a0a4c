"""`torchyard lookup` and `torchyard explain`."""

from __future__ import annotations

from typing import Any

import click

from builder.cli.options import combination_options, here_option, matrix_of, query_of
from builder.cli.output import emit_json, table
from builder.errors import NoMatchError, UsageError
from builder.resolve.choose import SHOWN_REASONS, failure_message
from builder.resolve.facts import Facts
from builder.resolve.report import explanation_json, result_json
from builder.resolve.resolver import Result, explain, lookup


@click.command("lookup")
@combination_options
@here_option
@click.option("--limit", default=20, show_default=True, metavar="N", type=int, help="Rows to show (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list (a stable contract).")
@click.pass_context
def lookup_cmd(ctx: click.Context, /, limit: int, as_json: bool, here: bool, **kwargs: Any) -> None:
    """Valid combinations for a driver / GPU / version request, best first."""
    if limit < 0:
        raise UsageError(f"--limit: {limit} is negative (0 shows every row)")
    m = matrix_of(ctx)
    q = query_of(m, kwargs, here=here)
    found = lookup(m, q)
    shown = found.valid[:limit] if limit else found.valid
    if not found.valid:
        raise NoMatchError(failure_message(found))
    if as_json:
        emit_json([result_json(Facts(m), r) for r in shown])
        return
    click.echo(_results_table(shown, arch=q.arch is not None, driver=q.driver is not None))
    more = len(found.valid) - len(shown)
    click.echo(
        f"\n{len(found.valid)} valid"
        + (f" ({more} more: --limit 0)" if more else "")
        + f"; {len(found.rejected)} ruled out"
        + (":" if found.rejected else ".")
    )
    for reason, count in found.reasons()[:SHOWN_REASONS]:
        click.echo(f"  {count:5d}  {reason}")


def _results_table(results: tuple[Result, ...], *, arch: bool, driver: bool) -> str:
    headers = ["ID", "TORCH", "VISION", "AUDIO", "CUDA", "CUDNN", "NCCL", "PY", "OS"]
    headers += ["DRIVER"] if driver else []
    headers += ["ARCH"] if arch else []
    rows = []
    for r in results:
        v = r.combo.variant
        row = [
            r.combo.id,
            r.combo.local_version,
            str(r.combo.torch.torchvision),
            str(r.combo.torch.torchaudio),
            str(v.cuda or "-"),
            str(v.cudnn or "-"),
            str(v.nccl or "?"),
            r.combo.python,
            r.combo.os.name,
        ]
        row += [r.driver_mode.value if r.driver_mode else "-"] if driver else []
        if arch:
            row += [f"{r.arch_support.value} ({r.arch_code.name})" if r.arch_support and r.arch_code else "-"]
        rows.append(row)
    return table(headers, rows)


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
        emit_json(explanation_json(e))
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
