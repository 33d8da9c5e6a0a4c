"""`torchyard --help` and every `COMMAND --help` import nothing heavy (docs/architecture.md): the command list comes
from main.py's summaries, each command's module keeps docker, jinja2, cyclonedx, jsonschema, cryptography, requests
and zstandard out of its imports. Measured in a fresh interpreter, as a user's shell starts one."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest

from builder.cli.main import _COMMANDS, cli
from builder.cli.matrix_cmd import _LAZY

HEAVY = ("docker", "jinja2", "cyclonedx", "jsonschema", "requests", "urllib3", "zstandard", "cryptography", "torch")
PROBE = f"""
import sys
from builder.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = {HEAVY!r}
print(" ".join(sorted({{m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy}})))
"""


def loaded(*argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.splitlines()[-1].split()


@pytest.mark.parametrize("argv", [("--help",), *((name, "--help") for name in _COMMANDS)], ids=" ".join)
def test_help_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    assert loaded(*argv) == []


def test_the_command_list_says_what_each_command_s_own_help_says() -> None:
    ctx = click.Context(cli)
    for name, (target, summary) in _COMMANDS.items():
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert name in (command.name, "explain")
        assert command.get_short_help_str(200) == click.Command(name, help=summary).get_short_help_str(200), name
    assert cli.get_command(ctx, "no-such-command") is None


def test_matrix_help_imports_none_of_its_lazy_commands() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from builder.cli.main import main\ntry: main(['matrix', '--help'])\n"
         "except SystemExit: pass\nprint(' '.join(sorted(m for m in sys.modules if m.startswith(('builder.upstream', "
         "'builder.publish', 'builder.pipeline', 'builder.cli.sync_cmd', 'builder.cli.outdated_cmd')))))"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "outdated" in done.stdout  # the list names it ...
    assert done.stdout.splitlines()[-1] == ""  # ... and imported nothing of it


def test_the_matrix_list_says_what_each_lazy_command_s_own_help_says() -> None:
    for name, (target, summary) in _LAZY.items():
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert command.get_short_help_str(200) == click.Command(name, help=summary).get_short_help_str(200), name
