"""pip's requirements-file format (https://pip.pypa.io/en/stable/reference/requirements-file-format/), read
strictly: lines joined at a trailing backslash, ` #` comments, then a requirement with its --hash options, or
options of their own line. What each option becomes:

- `-r` / `-c FILE`: read in place, relative to the file that names it, and only inside the top file's folder
  (links resolved): a file elsewhere on this machine is not the user's to hand to a build unseen. A cycle is
  refused with its path.
- `-i` / `--index-url`, `--extra-index-url`, `-f URL`, `--trusted-host`: the build's index settings (a BuildKit
  secret: they may hold credentials, `${VAR}` expanded from this environment as pip does); never in the file the
  image keeps. `-f FOLDER`: a local folder of wheels, copied into the build like a local project.
- `--no-index`, `--pre`, `--require-hashes`: flags of the install. `-e` is refused (an editable install points
  at sources the image does not keep), as is any other option (it would be silently lost).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.core import safety
from builder.core.errors import UsageError
from builder.core.files import read_text
from builder.render.network import Indexes
from builder.render.reqline import Place, Sources, local_source, read_entry
from builder.render.reqtypes import Entry, LocalSource, Requirements

_COMMENT = re.compile(r"(^|\s+)#.*$")
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")
_HASH = re.compile(r"(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128})")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}(:[0-9]{1,5})?")
MAX_FILES = 100  # files one --requirements may read, includes counted
OPTIONS = {
    "-r": "-r", "--requirement": "-r", "-c": "-c", "--constraint": "-c", "-e": "-e", "--editable": "-e",
    "-i": "-i", "--index-url": "-i", "--extra-index-url": "--extra-index-url", "-f": "-f", "--find-links": "-f",
    "--trusted-host": "--trusted-host", "--hash": "--hash",
    "--no-index": "--no-index", "--pre": "--pre", "--require-hashes": "--require-hashes",
}  # fmt: skip
FLAGS = ("--no-index", "--pre", "--require-hashes")


@dataclass(frozen=True)
class Logical:
    number: int  # the first physical line
    text: str


@dataclass
class _Read:
    """What reading gathers across a file and its includes."""

    root: Path
    env: Mapping[str, str]
    sources: Sources = field(default_factory=Sources)
    entries: list[Entry] = field(default_factory=list)
    constraints: list[Entry] = field(default_factory=list)
    index_url: tuple[str, str] | None = None  # (URL, where)
    extra: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    folders: list[LocalSource] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)
    files: int = 0


def read_requirements_file(path: Path, shown: str, env: Mapping[str, str]) -> Requirements:
    """The file and its includes; `shown` is the path as the user gave it (messages name file:line by it)."""
    return read_requirements_files(((path, shown),), env)


def read_requirements_files(files: Sequence[tuple[Path, str]], env: Mapping[str, str]) -> Requirements:
    """Several files as `pip install -r A -r B` reads them: one set, in order, each file's includes read relative
    to it and only inside its own folder; their index options are the one install's (a second --index-url that
    differs is refused, naming both files); local sources numbered across them."""
    state = _Read(root=Path(), env=env)
    for path, shown in files:
        state.root = Path(os.path.realpath(path.parent))
        _read(path, shown, state, (), constraint=False, what="--requirements")
    index = state.index_url
    shown = files[0][1] if len(files) == 1 else ", ".join(Path(name).name for _, name in files)  # the image's note
    indexes = Indexes(where=index[1] if index else shown, index_url=index[0] if index else None,
                      extra_index_urls=tuple(state.extra), find_links=tuple(state.links),
                      trusted_hosts=tuple(state.hosts))  # fmt: skip
    return Requirements(
        path=shown,
        entries=tuple(state.entries),
        constraints=tuple(state.constraints),
        indexes=indexes if index or state.extra or state.links or state.hosts else None,
        wheel_folders=tuple(state.folders),
        no_index="--no-index" in state.flags,
        pre="--pre" in state.flags,
        require_hashes="--require-hashes" in state.flags,
    )


def _read(path: Path, shown: str, state: _Read, stack: tuple[str, ...], *, constraint: bool, what: str) -> None:
    real = os.path.realpath(path)
    if real in stack:
        cycle = " -> ".join(os.path.relpath(x, state.root) for x in [*stack, real])
        raise UsageError(f"{what} {shown}: includes itself ({cycle})")
    state.files += 1
    if state.files > MAX_FILES:
        raise UsageError(f"{what} {shown}: more than {MAX_FILES} files read, includes counted")
    for logical in logical_lines(read_text(path, what)):
        where = f"{shown}:{logical.number}"
        _line(logical.text, Place(where, f"--requirements {where}", path.parent, state.root), shown, state,
              (*stack, real), constraint)  # fmt: skip


def logical_lines(text: str) -> list[Logical]:
    """pip's own preprocessing: lines ending in a backslash joined (a comment line ends the run), comments
    (`#` at the start or after whitespace) removed, blank lines dropped."""
    joined: list[Logical] = []
    run: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), 1):
        comment = bool(_COMMENT.match(line))
        if line.endswith("\\") and not comment:
            first = first or number
            run.append(line[:-1])
            continue
        if run:
            joined.append(Logical(first, "".join([*run, " " + line if comment else line])))
            run, first = [], 0
        else:
            joined.append(Logical(number, line))
    if run:
        joined.append(Logical(first, "".join(run)))
    cleaned = [Logical(x.number, _COMMENT.sub("", x.text).strip()) for x in joined]
    return [x for x in cleaned if x.text]


def _line(text: str, place: Place, shown: str, state: _Read, stack: tuple[str, ...], constraint: bool) -> None:
    requirement, options = _split(text)
    parsed = _options(options, place)
    if requirement:
        hashes = tuple(_hash(value, place) for name, value in parsed if name == "--hash")
        others = sorted({name for name, _ in parsed if name != "--hash"})
        if others:
            raise UsageError(f"{place.flag}: {others[0]} on a requirement's line; give it a line of its own")
        _requirement(read_entry(requirement, place, state.sources, hashes), place, state, constraint)
        return
    for name, value in parsed:
        _option(name, value, place, shown, state, stack, constraint)


def _split(text: str) -> tuple[str, str]:
    """pip's split of a line: the requirement is every space-separated word before the first that starts with -."""
    words = text.split(" ")
    for i, word in enumerate(words):
        if word.startswith("-"):
            return " ".join(words[:i]).strip(), " ".join(words[i:])
    return text, ""


def _options(text: str, place: Place) -> list[tuple[str, str]]:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"{place.flag}: {exc}") from None
    found: list[tuple[str, str]] = []
    while words:
        word = words.pop(0)
        name, value = _option_word(word)
        canonical = OPTIONS.get(name)
        if canonical is None:
            raise UsageError(
                f"{place.flag}: {name} is not an option torchyard takes in a requirements file (it takes -r, -c, "
                "-i/--index-url, --extra-index-url, -f/--find-links, --trusted-host, --no-index, --pre, "
                "--require-hashes, --hash)"
            )
        if canonical not in FLAGS and value is None:
            if not words:
                raise UsageError(f"{place.flag}: {name} needs a value")
            value = words.pop(0)
        if canonical in FLAGS and value is not None:
            raise UsageError(f"{place.flag}: {name} takes no value")
        found.append((canonical, value or ""))
    return found


def _option_word(word: str) -> tuple[str, str | None]:
    """`--opt=value`, `-rvalue` (optparse's attached short value) or a bare option."""
    if word.startswith("--"):
        name, sep, value = word.partition("=")
        return name, value if sep else None
    if len(word) > 2 and word[:2] in OPTIONS:
        return word[:2], word[2:].removeprefix("=")
    return word, None


def _hash(value: str, place: Place) -> str:
    if not _HASH.fullmatch(value):
        raise UsageError(f"{place.flag}: --hash {value[:80]!r}: expected sha256:, sha384: or sha512: and hex digits")
    return value


def _requirement(entry: Entry, place: Place, state: _Read, constraint: bool) -> None:
    if not constraint:
        state.entries.append(entry)
        return
    if entry.kind != "index" or entry.name is None:
        raise UsageError(f"{place.flag}: a constraint is a project name with a version range, not a URL or path")
    state.constraints.append(entry)


def _option(name: str, value: str, place: Place, shown: str, state: _Read, stack: tuple[str, ...],
            constraint: bool) -> None:  # fmt: skip
    if name in ("-r", "-c"):
        _include(value, place, shown, state, stack, constraint or name == "-c")
    elif name == "-e":
        raise UsageError(
            f"{place.flag}: -e {value}: an editable install points at sources the image does not keep; drop -e "
            "(the project is then installed as a copy)"
        )
    elif name == "--hash":
        raise UsageError(f"{place.flag}: --hash with no requirement before it on its line")
    elif name in FLAGS:
        state.flags.add(name)
    else:
        _index_option(name, _expand(value, place, state.env), place, state)


def _include(value: str, place: Place, shown: str, state: _Read, stack: tuple[str, ...], constraint: bool) -> None:
    if "://" in value:
        raise UsageError(f"{place.flag}: {value!r}: a requirements file is included from this machine, not a URL")
    path = place.folder / value
    if not Path(os.path.realpath(path)).is_relative_to(state.root):
        raise UsageError(
            f"{place.flag}: {value}: outside {state.root}, the requirements file's folder (links resolved); copy it in"
        )
    included = os.path.normpath(os.path.join(os.path.dirname(shown), value))
    _read(path, included, state, stack, constraint=constraint, what=f"{place.flag}: {'-c' if constraint else '-r'}")


def _expand(value: str, place: Place, env: Mapping[str, str]) -> str:
    def value_of(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in env:
            raise UsageError(f"{place.flag}: ${{{name}}} is not set in this environment")
        return env[name]

    return _ENV_VAR.sub(value_of, value)


def _index_option(name: str, value: str, place: Place, state: _Read) -> None:
    if name == "--trusted-host":
        if not _HOST.fullmatch(value):
            raise UsageError(f"{place.flag}: --trusted-host {value[:80]!r}: expected a host or host:port")
        state.hosts.append(value)
        return
    if name == "-f" and "://" not in value:
        state.folders.append(local_source(value, place, state.sources, wheels=True))
        return
    url = safety.check_url(place.flag, value, "https://user:token@pypi.example.com/simple")
    if name == "-i":
        if state.index_url and state.index_url[0] != url:
            raise UsageError(
                f"{place.flag}: a second --index-url ({safety.redact(url)!r}; {state.index_url[1]} gave "
                f"{safety.redact(state.index_url[0])!r}): pip would take the last; keep one"
            )
        state.index_url = (url, place.where)
    else:
        (state.extra if name == "--extra-index-url" else state.links).append(url)
