"""Paths torchyard.toml names: files and folders of the project (inside it, also after every symbolic link is
followed), and paths in the image (absolute, plain). Each check raises ValueError with what is wrong; the reader
puts the file and line in front."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from builder.core.errors import ProjectError
from builder.project.read import shown, string

Kind = Literal["file", "folder", "any"]
_IMAGE_PATH = re.compile(r"/[A-Za-z0-9._@%+=:,/-]*", re.ASCII)


def in_project(root: Path, kind: Kind) -> Callable[[Any], str]:
    """A converter: a path relative to the project's root that stays inside it, and exists as `kind`."""

    def convert(value: Any) -> str:
        return inside(root, string(value), kind)

    return convert


def inside(root: Path, text: str, kind: Kind) -> str:
    """`text` normalised (a/./b -> a/b); refused: absolute, '..', a symbolic link (anywhere on the way) that leads
    out of the project, a path that is not there or not of the kind asked."""
    path = PurePosixPath(text)
    if path.is_absolute() or text.startswith("~"):
        raise ValueError(f"{text!r} is not inside the project: give a path relative to {root}")
    if ".." in path.parts:
        raise ValueError(f"{text!r} climbs out with '..': give a path inside the project, relative to {root}")
    home = root.resolve()
    full = home.joinpath(*path.parts)
    target = full.resolve()
    if not target.is_relative_to(home):
        raise ValueError(f"{text!r} leads out of the project through a symbolic link (to {target})")
    if not full.exists():
        raise ValueError(f"{text!r}: no such {'file or folder' if kind == 'any' else kind} in {root}")
    if kind == "file" and not target.is_file():
        raise ValueError(f"{text!r} is not a file")
    if kind == "folder" and not target.is_dir():
        raise ValueError(f"{text!r} is not a folder")
    return str(path)


def image_path(value: Any) -> str:
    """An absolute path in the image, plain: no '..', '.', '//' or characters a Dockerfile line would quote."""
    text = string(value)
    if not _IMAGE_PATH.fullmatch(text):
        raise ValueError(f"{text!r}: expected an absolute path in the image like /app (letters, digits, ._-@%+=:,/)")
    plain = text.rstrip("/")
    if not plain:
        raise ValueError(f"{text!r}: give a folder in the image, not its root")
    if "//" in text or posixpath.normpath(plain) != plain:
        raise ValueError(f"{text!r}: expected a plain absolute path (no '..', '.' or '//')")
    return plain


def own_file(path: Path) -> None:
    """torchyard.toml and torchyard.lock are files of their folder: a symbolic link out of it is refused (a
    checkout's torchyard.lock -> ~/.bashrc must be neither read nor written through)."""
    if path.is_symlink() and not path.resolve().is_relative_to(path.parent.resolve()):
        raise ProjectError(f"{shown(path)}: a symbolic link out of its folder (to {path.resolve()}): remove it")


def replace_file(path: Path, text: str) -> None:
    """`text` as the file `path`, renamed over it: a symbolic link there is replaced, never written through."""
    own_file(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        with open(temporary, "x", encoding="utf-8") as handle:  # "x": never through a link planted there
            handle.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary.is_file() and not temporary.is_symlink():
            temporary.unlink()
        raise ProjectError(f"{shown(path)}: cannot write: {exc.strerror or exc}") from None
