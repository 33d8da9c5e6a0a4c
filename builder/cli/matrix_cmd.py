"""`torchyard matrix check|show|list`."""

from __future__ import annotations

import click

from builder.cli.options import matrix_of
from builder.cli.output import document, emit_json, table
from builder.core.resources import default_matrix_path
from builder.matrix import load_matrix
from builder.matrix.show import KINDS, grid, show

# Subcommands defined elsewhere load on use: `torchyard matrix list` never imports the builder or a registry client,
# and `matrix --help` lists them from these summaries (each its command's first sentence; test_fast_help).
_LAZY = {
    "publish": ("builder.cli.publish_cmd:matrix_publish_cmd",
                "List the publish set's items (and what it names but cannot build, with why)."),
    "ci": ("builder.cli.ci_cmd:matrix_ci_cmd",
           "Export the publish set: a GitHub Actions strategy.matrix (JSON) or a docker-bake.json."),
    "html": ("builder.cli.upstream_cmd:html_cmd",
             "Write the compatibility page: one self-contained HTML file (no external assets) with the torch x CUDA "
             "grid, driver floors, each wheel's GPU code, and a selector (driver, GPU, Python, platform) answering "
             "which published images run and why the others do not, by the same rules as `torchyard lookup`."),
    "sync": ("builder.cli.sync_cmd:sync_cmd",
             "Read upstream and print (or, with --write, insert) the matrix.toml entries it can source."),
    "outdated": ("builder.cli.outdated_cmd:outdated_cmd",
                 "Say which releases upstream has that matrix.toml lacks: torch (every release from the lowest "
                 "recorded on), cuda-toolkit, nvidia-cudnn-cu13, nvidia-nccl-cu13, onnxruntime-gpu, onnxruntime and "
                 "the nvidia/cuda image tags (newer than the newest recorded), each with how to add it."),
    "lock": ("builder.cli.upstream_cmd:lock_cmd",
             "Resolve every base image tag the templates can produce to its digest on each platform the matrix "
             "builds, and write them to matrix.lock next to the matrix."),
    "verify": ("builder.cli.upstream_cmd:verify_cmd",
               "Check matrix.toml against upstream: every torch / torchvision / torchaudio release on its index "
               "(exists, not yanked, a wheel for every Python and platform claimed, Requires-Dist pins), every base "
               "image tag on its registry for every platform built, and the base-image lock."),
}  # fmt: skip


class _MatrixGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _LAZY:
            return super().get_command(ctx, cmd_name)
        import importlib

        module, attr = _LAZY[cmd_name][0].split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The lazy commands from their summaries: listing them must not import them."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            own = super().get_command(ctx, name)
            command = own if own is not None else click.Command(name, help=_LAZY[name][1])
            rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group("matrix", cls=_MatrixGroup)
def matrix_group() -> None:
    """Inspect and check matrix.toml."""


@matrix_group.command("check")
@click.argument("file", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as one JSON object.")
@click.pass_context
def check_cmd(ctx: click.Context, file: str | None, as_json: bool) -> None:
    """Validate FILE (default: the matrix in use): syntax, keys, versions, references, contradictions."""
    path = file or (ctx.find_root().obj or {}).get("matrix") or str(default_matrix_path())
    m = load_matrix(path)
    variants = sum(len(t.variants) for t in m.torch)
    if as_json:
        counts = {"cuda": len(m.cuda), "archs": len(m.archs), "torch": len(m.torch), "variants": variants}
        emit_json(document({"file": str(path), "ok": True} | counts | {"os": len(m.os), "sources": len(m.sources)}))
        return
    click.echo(
        f"{path}: ok ({len(m.cuda)} CUDA releases, {len(m.archs)} architectures, "
        f"{len(m.torch)} torch releases / {variants} variants, {len(m.os)} OS bases, "
        f"{len(m.sources)} sources)"
    )


@matrix_group.command("show")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (a stable contract).")
@click.pass_context
def show_cmd(ctx: click.Context, kind: str, name: str, as_json: bool) -> None:
    """One entry: torch 2.5.1 | cuda 12.4 | arch sm_89 | cudnn 9.1.0.70 | os debian12."""
    data = show(matrix_of(ctx), kind, name)
    if as_json:
        emit_json(document(data))
        return
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            click.echo(f"{key}:")
            for item in value:
                click.echo("  - " + ", ".join(f"{k}={_fmt(v)}" for k, v in item.items() if v not in (None, [])))
        else:
            click.echo(f"{key}: {_fmt(value)}")


def _fmt(value: object) -> str:
    if isinstance(value, list):
        words = [str(v) for v in value]
        return ("; " if any(" " in w for w in words) else " ").join(words) if words else "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return "-" if value is None else str(value)


@matrix_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the grid as one JSON object.")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """A grid of torch releases x CUDA variants (* PyPI default, + published)."""
    m = matrix_of(ctx)
    if as_json:
        releases = [
            {
                "torch": str(t.version),
                "pypi_default": t.pypi_default,
                "variants": [v.name for v in t.variants],
                "python": list(t.python),
                "platforms": {w.platform.value: w.pypi_default for w in t.wheels},
            }
            for t in reversed(m.torch)
        ]
        emit_json(document({"releases": releases}, total_of="releases"))
        return
    headers, rows = grid(m)
    click.echo(table(headers, rows))
