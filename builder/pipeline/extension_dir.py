"""An extension folder (`--extension DIR`), and a local project, wheel or folder of wheels a requirement names
(`--pip ./proj`, a requirements file's `./proj` or `-f ./wheels`), as torchyard copies it into a build context and
hashes it into the content hash: the same checked walk for both. Links are not followed: one that stays inside the
folder is kept as a link, one that points out of it is refused (it could carry a private host file into the
context), as are named pipes, devices and sockets; the walk has size, count and depth limits.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builder.core.errors import RenderError
from builder.core.files import file_kind

_IGNORED = ("build", "__pycache__", ".git")
EXTENSION_LIMIT = 256 << 20  # bytes of source an extension folder may bring into the context
EXTENSION_FILES = 20_000
_DEPTH = 40


@dataclass(frozen=True)
class Node:
    """One entry of an extension folder, by its path relative to the folder."""

    rel: str
    kind: str  # file | dir | link
    size: int = 0
    target: str = ""  # a link's target, relative, inside the folder


def check_extension_dir(path: Path) -> None:
    if not path.is_dir():
        raise RenderError(f"--extension {path}: not a directory with a setup.py or pyproject.toml")
    if not ((path / "setup.py").is_file() or (path / "pyproject.toml").is_file()):
        raise RenderError(f"--extension {path}: no setup.py or pyproject.toml in it")


def walk_source(root: Path, flag: str) -> list[Node]:
    """walk_extension for a folder; a regular file (a wheel or sdist) is one node with the path "" (within the
    size limit). `flag` names what gave the path, for the messages."""
    info = os.stat(root, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        return walk_extension(root, flag)
    if not stat.S_ISREG(info.st_mode):
        raise RenderError(f"{flag} {root}: {file_kind(info.st_mode)}, not a file to copy")
    if info.st_size > EXTENSION_LIMIT:
        raise RenderError(f"{flag} {root}: more than {EXTENSION_LIMIT >> 20} MiB")
    return [Node("", "file", info.st_size)]


def walk_extension(root: Path, flag: str = "--extension") -> list[Node]:
    """Every entry to copy, checked: no link out of the folder, no special file, within the limits."""
    found: list[Node] = []
    total = 0
    for node in _walk(root, root.resolve(), "", 0, flag):
        total += node.size
        found.append(node)
        if total > EXTENSION_LIMIT or len(found) > EXTENSION_FILES:
            raise RenderError(
                f"{flag} {root}: more than {EXTENSION_LIMIT >> 20} MiB or {EXTENSION_FILES} files of source"
            )
    return found


def _walk(folder: Path, real_root: Path, prefix: str, depth: int, flag: str) -> Iterator[Node]:
    if depth > _DEPTH:
        raise RenderError(f"{flag} {real_root}: folders nest more than {_DEPTH} deep at {prefix}")
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name in _IGNORED or entry.name.endswith(".egg-info"):
                continue
            rel = f"{prefix}{entry.name}"
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                yield _link(entry.path, real_root, rel, flag)
            elif stat.S_ISDIR(info.st_mode):
                yield Node(rel, "dir")
                yield from _walk(Path(entry.path), real_root, rel + "/", depth + 1, flag)
            elif stat.S_ISREG(info.st_mode):
                yield Node(rel, "file", info.st_size)
            else:
                raise RenderError(f"{flag} {real_root}: {rel} is {file_kind(info.st_mode)}, not a file to copy")


def _link(path: str, real_root: Path, rel: str, flag: str) -> Node:
    target = os.readlink(path)
    resolved = Path(os.path.realpath(path))
    if not resolved.is_relative_to(real_root) or os.path.isabs(target):
        raise RenderError(f"{flag} {real_root}: {rel} links to {target}, outside the folder; copy the file in instead")
    return Node(rel, "link", 0, target)
