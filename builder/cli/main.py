"""Entry point: the command group and the one place errors become a line and an exit code."""

from __future__ import annotations

import importlib
import os
import sys

import click

from builder import __version__
from builder.core import env
from builder.core.errors import TorchyardError
from builder.core.redact import redact

# Environment variables torchyard reads, declared once.
ENV_MATRIX = env.MATRIX
ENV_DEBUG = env.DEBUG


INTERNAL_ERROR = 70  # EX_SOFTWARE: torchyard itself failed

# Commands load on use, so `torchyard lookup` never imports jinja2 or docker.
_COMMANDS = {
    "doctor": "builder.cli.doctor_cmd:doctor_cmd",
    "lookup": "builder.cli.lookup_cmd:lookup_cmd",
    "explain": "builder.cli.lookup_cmd:explain_cmd",
    "inspect": "builder.cli.inspect_cmd:inspect_cmd",
    "matrix": "builder.cli.matrix_cmd:matrix_group",
    "render": "builder.cli.render_cmd:render_cmd",
    "build": "builder.cli.build_cmd:build_cmd",
    "smoke": "builder.cli.smoke_cmd:smoke_cmd",
    "publish": "builder.cli.publish_cmd:publish_cmd",
    "promote": "builder.cli.promote_cmd:promote_cmd",
    "lock": "builder.cli.lock_cmd:lock_group",
    "run": "builder.cli.run_cmd:run_cmd",
    "verify-image": "builder.cli.verify_cmd:verify_cmd",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[cmd_name].split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def main(argv: list[str] | None = None) -> None:
    debug = os.environ.get(ENV_DEBUG) == "1" or "--debug" in (argv or sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="torchyard", standalone_mode=False)
    except TorchyardError as exc:
        if debug:
            raise
        click.echo(f"torchyard: error: {redact(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a path given on the command line that cannot be read or written
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"torchyard: error: {redact(where + (exc.strerror or str(exc)))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:  # Ctrl-C outside the steps that raise Interrupted themselves
        click.echo("torchyard: error: interrupted: nothing unverified was tagged or pushed", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        where = f"{exc.ctx.command_path}: " if isinstance(exc, click.UsageError) and exc.ctx else ""
        click.echo(f"torchyard: error: {where}{redact(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: one line, not a traceback (--debug shows it)
        if debug:
            raise
        click.echo(f"torchyard: error: internal error: {type(exc).__name__}: {redact(str(exc))[:300]} "
                   "(a bug: run again with --debug and report it)", err=True)  # fmt: skip
        sys.exit(INTERNAL_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
