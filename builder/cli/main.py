"""Entry point: the command group and the one place errors become a line and an exit code."""

from __future__ import annotations

import os
import sys

import click

from builder import __version__
from builder.cli.lookup_cmd import explain_cmd, lookup_cmd
from builder.cli.matrix_cmd import matrix_group
from builder.errors import TorchyardError

# Environment variables torchyard reads, declared once.
ENV_MATRIX = "TORCHYARD_MATRIX"
ENV_DEBUG = "TORCHYARD_DEBUG"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="torchyard")
@click.option(
    "--matrix",
    "matrix_path",
    envvar=ENV_MATRIX,
    metavar="FILE",
    help=f"matrix.toml to use instead of the packaged one (env {ENV_MATRIX}).",
)
@click.option("--debug", is_flag=True, envvar=ENV_DEBUG, help="Show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, matrix_path: str | None, debug: bool) -> None:
    """PyTorch + CUDA container images whose compatibility is a checked fact."""
    ctx.obj = {"matrix": matrix_path, "debug": debug}


cli.add_command(lookup_cmd)
cli.add_command(explain_cmd)
cli.add_command(matrix_group)


def main(argv: list[str] | None = None) -> None:
    debug = os.environ.get(ENV_DEBUG) == "1" or "--debug" in (argv or sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="torchyard", standalone_mode=False)
    except TorchyardError as exc:
        if debug:
            raise
        click.echo(f"torchyard: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("torchyard: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        where = f"{exc.ctx.command_path}: " if isinstance(exc, click.UsageError) and exc.ctx else ""
        click.echo(f"torchyard: error: {where}{exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
