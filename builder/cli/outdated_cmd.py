"""`torchyard matrix outdated`: what upstream has that matrix.toml lacks (exit 7 when something is missing)."""

from __future__ import annotations

import sys
from typing import Any

import click

from builder.cli.options import matrix_of
from builder.cli.output import document, emit_json
from builder.cli.upstream_cmd import clients, upstream_options
from builder.core.errors import UsageError

# The exit code of "upstream has releases the matrix lacks" (README's table).
OUTDATED = 7


@click.command("outdated")
@click.option("--only", multiple=True, metavar="NAME", help="torch, cuda-toolkit, ..., nvidia/cuda (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as one JSON object.")
@upstream_options(indexes=True, registries=True)
@click.pass_context
def outdated_cmd(ctx: click.Context, /, only: tuple[str, ...], as_json: bool, **kwargs: Any) -> None:
    """Say which releases upstream has that matrix.toml lacks: torch (every release from the lowest
    recorded on), cuda-toolkit, nvidia-cudnn-cu13, nvidia-nccl-cu13, onnxruntime-gpu, onnxruntime and the
    nvidia/cuda image tags (newer than the newest recorded), each with how to add it. Exit 0 nothing
    missing, 7 something missing, 5 nothing missing but a source could not be read (not checked)."""
    from builder.upstream.index import PYPI
    from builder.upstream.outdated import TRACKED, State, outdated

    known = [t.name for t in TRACKED]
    for name in only:
        if name not in known:
            raise UsageError(f"--only {name}: not tracked (one of {', '.join(known)})")
    m = matrix_of(ctx)
    pypi = kwargs.pop("pypi_url") or PYPI
    kwargs.pop("pytorch_index_url")
    mirror = kwargs.pop("registry_mirror")
    http, registry = clients(kwargs)
    findings = outdated(m, http, registry, pypi, mirror, only)
    missing = sum(len(f.missing) for f in findings)
    unchecked = [f for f in findings if f.state is State.NOT_CHECKED]
    if as_json:
        emit_json(document({"findings": [f.as_json() for f in findings], "missing": missing}))
    else:
        click.echo(_text(findings, missing, len(unchecked)), nl=False)
    sys.exit(OUTDATED if missing else 5 if unchecked else 0)


def _text(findings: list[Any], missing: int, unchecked: int) -> str:
    lines = []
    for f in findings:
        t = f.tracked
        head = f"{t.name} ({t.table}, {f.window})"
        if f.missing:
            lines.append(f"{head}: {len(f.missing)} missing")
            for r in f.missing:
                when = f" (uploaded {r.uploaded})" if r.uploaded else ""
                lines.append(f"  {r.version}{when}: {t.add.format(v=r.version)}")
        elif f.why:
            lines.append(f"{head}: not checked: {f.why}")
        else:
            lines.append(f"{head}: up to date")
    lines.append(f"matrix outdated: {missing} release(s) missing, {unchecked} source(s) not checked")
    return "\n".join(lines) + "\n"
