"""Entry point: the command group and the one place errors become a line and an exit code."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from types import FrameType

import click

from builder import __version__
from builder.core import env
from builder.core.errors import Interrupted, TorchyardError
from builder.core.redact import redact

# Environment variables torchyard reads, declared once.
ENV_MATRIX = env.MATRIX
ENV_DEBUG = env.DEBUG


INTERNAL_ERROR = 70  # EX_SOFTWARE: torchyard itself failed
TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended
_TERMINATED = threading.Event()

# Commands load on use, so `torchyard lookup` never imports jinja2 or docker; each with its one-line summary (the
# first sentence of its help, checked by tests/unit/test_fast_help.py), so `torchyard --help` imports none of them.
_COMMANDS = {
    "doctor": ("builder.cli.doctor_cmd:doctor_cmd",
               "Which image runs on this machine, the docker run line that starts it, and what to fix."),
    "lookup": ("builder.cli.lookup_cmd:lookup_cmd",
               "Valid combinations for a driver / GPU / version request, best first, and why the rest fail."),
    "explain": ("builder.cli.lookup_cmd:explain_cmd",
                "Every rule for the combination lookup picks first (or the nearest candidate), with sources."),
    "inspect": ("builder.cli.inspect_cmd:inspect_cmd",
                "What IMAGE holds (any image with torch) and whether it runs on the driver / GPU given, or here."),
    "matrix": ("builder.cli.matrix_cmd:matrix_group", "Inspect and check matrix.toml."),
    "render": ("builder.cli.render_cmd:render_cmd",
               "Write Dockerfile + build context + plan.json and print the docker build command."),
    "build": ("builder.cli.build_cmd:build_cmd",
              "Build (and verify, smoke-test, tag, push) images for the best or pinned combination."),
    "smoke": ("builder.cli.smoke_cmd:smoke_cmd", "Run the smoke suite inside IMAGE (any image with Python and torch)."),
    "publish": ("builder.cli.publish_cmd:publish_cmd",
                "Build, smoke-test and push the publish set; aliases move only after their images passed."),
    "promote": ("builder.cli.promote_cmd:promote_cmd",
                "Copy SRC (repo:tag or repo@digest) to DST (repo:tag) inside the registry: blobs by cross-repository "
                "mount (copied when SRC is on another registry), then the manifest or index byte for byte, so DST "
                "has SRC's digest."),
    "lock": ("builder.cli.lock_cmd:lock_group",
             "The exact distribution set of an image, to install it outside the image (docs/lock.md)."),
    "init": ("builder.cli.init_cmd:init_cmd",
             "Write torchyard.toml for this machine from doctor's answer (commented), and torchyard.lock beside it."),
    "run": ("builder.cli.run_cmd:run_cmd",
            "Start the image for this machine (or IMAGE) with the GPUs, --ipc=host, the current folder at "
            "/workspace and your UID:GID."),
    "devcontainer": ("builder.cli.devcontainer_cmd:devcontainer_cmd",
                     "Write .devcontainer/devcontainer.json for this machine: the notebook image found here and this "
                     "engine's GPU flags."),
    "verify-image": ("builder.cli.verify_cmd:verify_cmd",
                     "Check that REF (repo:tag or repo@digest) is signed with the team's key and carries an SBOM and "
                     "a SLSA provenance statement about its exact digest, each signed too, as OCI referrers and as "
                     "cosign attestations (docs/trust.md)."),
}  # fmt: skip


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[cmd_name][0].split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries above, shortened as click shortens a command's own help."""
        limit = formatter.width - 6 - max(len(name) for name in _COMMANDS)
        rows = [
            (name, click.Command(name, help=summary).get_short_help_str(limit))
            for name, (_, summary) in _COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


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


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (what GitLab, Jenkins and Kubernetes send to cancel a job) is handled as Ctrl-C: the same clean-up
    runs (builds stopped, containers removed, aliases held), and the exit code says which signal it was."""
    _TERMINATED.set()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    _TERMINATED.clear()
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        _main(argv)
        return
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _main(argv)
    finally:
        signal.signal(signal.SIGTERM, before)


def _interrupted() -> int:
    return TERMINATED if _TERMINATED.is_set() else Interrupted.exit_code


def _main(argv: list[str] | None) -> None:
    debug = os.environ.get(ENV_DEBUG) == "1" or "--debug" in (argv or sys.argv[1:])
    try:
        code = cli.main(args=argv, prog_name="torchyard", standalone_mode=False)
    except TorchyardError as exc:
        if debug:
            raise
        click.echo(f"torchyard: error: {redact(str(exc))}", err=True)
        sys.exit(_interrupted() if isinstance(exc, Interrupted) else exc.exit_code)
    except OSError as exc:  # a path given on the command line that cannot be read or written
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"torchyard: error: {redact(where + (exc.strerror or str(exc)))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:  # Ctrl-C or SIGTERM outside the steps that raise Interrupted themselves
        click.echo("torchyard: error: interrupted: nothing unverified was tagged or pushed", err=True)
        sys.exit(_interrupted())
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
