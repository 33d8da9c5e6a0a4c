"""The files a project's requirements files include with -r / -c, for torchyard.lock (docs/project.md,
"torchyard.lock"): a change to one of them changes what the image installs, as a change to the named file does.

Found where builder/render/reqfile.py reads them (relative to the file that names them, only inside the named
file's own folder, links resolved; pip's line joining and comments by its logical_lines), but leniently: a line
the build would refuse, a URL, a file outside that folder or not there is passed over here. The build's reader
says what is wrong with it, in its own words and with its file:line; the lock records only what can be hashed.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from builder.render.reqfile import MAX_FILES, OPTIONS, logical_lines

_INCLUDE = ("-r", "-c")  # the canonical names (reqfile.OPTIONS) of an include


def included_files(root: Path, named: str) -> list[tuple[str, str]]:
    """(file, the file that includes it) for every file `named` includes, and they include in turn, in reading
    order, each once; paths relative to the project's `root`, as the reader shows them (`dev/base.txt`)."""
    top = root / named
    fence = Path(os.path.realpath(top.parent))
    found: list[tuple[str, str]] = []
    _walk(top, named, fence, found, {os.path.realpath(top)})
    return found


def _walk(path: Path, shown: str, fence: Path, found: list[tuple[str, str]], seen: set[str]) -> None:
    for value in _includes(path):
        child = path.parent / value
        real = os.path.realpath(child)
        if "://" in value or real in seen or len(seen) >= MAX_FILES:
            continue
        if not Path(real).is_relative_to(fence) or not Path(real).is_file():
            continue  # refused by the build's reader, which names the line
        seen.add(real)
        child_shown = os.path.normpath(os.path.join(os.path.dirname(shown), value))
        found.append((child_shown, shown))
        _walk(child, child_shown, fence, found, seen)


def _includes(path: Path) -> list[str]:
    """The values of the -r/-c options of the file's lines (`-r x`, `-rx`, `--requirement=x`, `-c x` ...)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return []
    values: list[str] = []
    for line in logical_lines(text):
        try:
            words = shlex.split(line.text)
        except ValueError:  # an unclosed quote: the build's reader says so
            continue
        values += _values(words)
    return values


def _values(words: list[str]) -> list[str]:
    found: list[str] = []
    for i, word in enumerate(words):
        name, sep, value = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        if OPTIONS.get(name) not in _INCLUDE:
            continue
        value = value if sep else value.removeprefix("=")
        if value:
            found.append(value)
        elif i + 1 < len(words):
            found.append(words[i + 1])
    return found
