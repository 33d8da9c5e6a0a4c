"""The docs say only what is true: every `torchyard ...` command line in README.md and docs/ names a command
that exists and flags that command takes (as its --help lists them), every file they link or name by path
exists, and every exit code they state is a row of README's table with the meaning the code gives it. Each
checker is also shown to fail on a doc with one thing renamed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from builder.cli.main import TERMINATED, cli
from builder.cli.outdated_cmd import OUTDATED
from builder.core import errors
from builder.resolve.verdict import CANNOT_TELL_EXIT

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_INLINE = re.compile(r"`(torchyard [^`]*)`")
_COMMANDS = set(cli.list_commands(click.Context(cli)))
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PATH = re.compile(r"`((?:builder|tests|docs|bench|scripts|templates|examples|\.ci|\.github)/[\w./-]+)`")
_EXIT = re.compile(r"\bexits? (?:code )?(?:is )?(\d+)\b|\(exit (\d+)[,)]")


def command_lines(text: str) -> list[str]:
    """Every `torchyard ...` command a doc writes: each line of a code block that starts with it (after an
    optional `$ `), and inline code whose second word is a command (`torchyard labels and manifest` is a
    value, not a command)."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        stripped = line.strip().removeprefix("$ ")
        if fenced and stripped.startswith("torchyard "):
            found.append(stripped.split("  #", 1)[0].split(" # ", 1)[0].strip())
        elif not fenced:
            found += [m for m in _INLINE.findall(line) if m.split()[1:2] and m.split()[1] in _COMMANDS]
    return found


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line.replace("...", " "))
    except ValueError:
        return line.split()


def flag_problems(line: str) -> list[str]:
    """What a command line names that the CLI lacks: an unknown command, or a flag its --help does not list."""
    words = _words(line)[1:]
    command: click.Command = cli
    ctx = click.Context(cli)
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        found = command.get_command(ctx, words[0])
        if found is None:
            if words[0].isupper() or "|" in words[0] or "[" in words[0]:
                break  # a placeholder (IMAGE, KIND) where a group takes an argument
            return [f"{line!r}: no command {words[0]!r}"]
        command, words = found, words[1:]
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    if "--" in words:  # past a lone `--` come another program's words (run: docker run options, the command)
        words = words[: words.index("--")]
    flags = {w.split("=", 1)[0].strip("[]") for w in words if w.lstrip("[").startswith("--")}
    return [f"{line!r}: {command.name} has no {flag}" for flag in sorted(flags - known) if re.match(r"^--\w", flag)]


def path_problems(doc: Path, text: str) -> list[str]:
    found = []
    for target in _LINK.findall(text):
        if "://" not in target and not target.startswith("mailto:") and not (doc.parent / target).exists():
            found.append(f"{doc.name}: links {target}, which does not exist")
    for path in _PATH.findall(text):
        wheel_only = path.startswith("builder/data/")  # pyproject.toml's force-include: a path in the wheel
        if wheel_only:
            assert f'= "{path}"' in (ROOT / "pyproject.toml").read_text(), path
        elif "*" not in path and "<" not in path and not (ROOT / path.rstrip(".")).exists():
            found.append(f"{doc.name}: names {path}, which does not exist")
    return found


def readme_exit_codes() -> dict[int, str]:
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", (ROOT / "README.md").read_text(), re.M)
    return {int(code): meaning for code, meaning in rows}


def exit_problems(doc: Path, text: str, table: dict[int, str]) -> list[str]:
    # 127 is a shell's "command not found" inside an image (docs/smoke.md), not a torchyard exit code
    stated = {int(a or b) for a, b in _EXIT.findall(text)} - {127}
    return [f"{doc.name}: states exit {code}, not a row of README's table" for code in sorted(stated - set(table))]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_command_and_flag_a_doc_names_exists(doc: Path) -> None:
    problems = [p for line in command_lines(doc.read_text()) for p in flag_problems(line)]
    assert problems == []


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_file_a_doc_names_exists(doc: Path) -> None:
    assert path_problems(doc, doc.read_text()) == []


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_exit_code_a_doc_states_is_in_the_readme_table(doc: Path) -> None:
    assert exit_problems(doc, doc.read_text(), readme_exit_codes()) == []


def test_the_readme_table_matches_the_codes_the_code_uses() -> None:
    table = readme_exit_codes()
    assert set(table) == {0, 1, 2, 3, 4, 5, CANNOT_TELL_EXIT, OUTDATED, 70, 130, TERMINATED}
    assert "SIGTERM" in table[TERMINATED]
    assert "matrix outdated" in table[OUTDATED]
    for cls, words in (
        (errors.NoMatchError, "nothing valid"),
        (errors.UsageError, "bad flag"),
        (errors.EngineError, "Docker engine"),
        (errors.BuildError, "build"),
        (errors.PushError, "registry"),
        (errors.UpstreamError, "upstream"),
        (errors.Interrupted, "interrupted"),
    ):
        assert words in table[cls.exit_code], (cls.__name__, cls.exit_code)
    assert "CANNOT TELL" in table[CANNOT_TELL_EXIT]
    assert "publish" in table[errors.BuildError.exit_code]  # docs/publish.md: a failed image exits 4


# --- the checkers can fail -----------------------------------------------------------------------------------


def test_a_renamed_flag_is_found() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "--forward-compat" in readme or "--driver 535" in readme
    renamed = readme.replace("--driver 535", "--driver-version 535")
    problems = [p for line in command_lines(renamed) for p in flag_problems(line)]
    assert any("lookup has no --driver-version" in p for p in problems)


def test_a_missing_command_and_file_and_exit_code_are_found() -> None:
    assert command_lines("```sh\ntorchyard lookpu --driver 535   # typo\n```\n") == ["torchyard lookpu --driver 535"]
    assert flag_problems("torchyard lookpu --driver 535") == ["'torchyard lookpu --driver 535': no command 'lookpu'"]
    doc = ROOT / "docs" / "host.md"
    assert path_problems(doc, "see [rules](rules.md) and `builder/host/nowhere.py`") == [
        "host.md: names builder/host/nowhere.py, which does not exist"
    ]
    publish = (ROOT / "docs" / "publish.md").read_text()
    assert "the exit code is 4" in publish
    changed = publish.replace("the exit code is 4", "the exit code is 8")
    assert exit_problems(doc, changed, readme_exit_codes()) == ["host.md: states exit 8, not a row of README's table"]
