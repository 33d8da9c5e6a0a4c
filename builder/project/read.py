"""Located reading of torchyard.toml and torchyard.lock: matrix.toml's reader (the key path -> its line), with the
project's error class and, for an unknown key, what is allowed there."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from builder.core.errors import ProjectError, UsageError
from builder.core.files import read_text
from builder.core.kinds import did_you_mean
from builder.matrix.locate import KeyPath
from builder.matrix.reader import Context, Entry
from builder.matrix.toml_text import TomlSyntaxError, parse_toml


@dataclass(frozen=True)
class ProjectContext(Context):
    """A torchyard.toml or torchyard.lock: every problem is one `file:line: key: message` (exit 2)."""

    def fail(self, path: KeyPath, label: str, message: str) -> NoReturn:
        line = self.locator.line_of(path)
        where = f"{self.file}:{line}" if line else self.file
        raise ProjectError(f"{where}: {label}: {message}")


class Table(Entry):
    """One table; an unknown key is refused with "did you mean" and the keys the table takes."""

    def __init__(self, ctx: Context, path: KeyPath, label: str, raw: object, allowed: Iterable[str]) -> None:
        allowed = tuple(allowed)
        for key in raw if isinstance(raw, dict) else ():
            if key not in allowed:
                where, name = (*path, key), f"{label}.{key}" if label else key
                ctx.fail(where, name, f"unknown key{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")
        super().__init__(ctx, path, label, raw, allowed)

    def keys(self) -> tuple[str, ...]:
        return tuple(self.raw)

    def fail_key(self, key: str, message: str) -> NoReturn:
        """A top-level key (label ""): named as it is written, not ".key"."""
        self.ctx.fail((*self.path, key), f"{self.label}.{key}" if self.label else key, message)


def shown(path: Path) -> str:
    """A file as the user knows it: relative to the current folder when it is inside it, else absolute."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def open_toml(path: Path, what: str) -> tuple[ProjectContext, dict[str, Any]]:
    """The file's text and document; a file that cannot be read or is no TOML is one line naming it."""
    name = shown(path)
    text = read_text(path, "", error=ProjectError)
    try:
        return ProjectContext(name, text), parse_toml(text)
    except TomlSyntaxError as exc:
        raise ProjectError(f"{name}: not {what}: {exc}") from None


def string(value: Any) -> str:
    """A non-empty string with no control characters (the values reach Dockerfiles and command lines)."""
    if isinstance(value, float):
        raise ValueError(f'expected a string, found the number {value!r}: quote it ("3.10" is not 3.1)')
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, found {value!r}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(f"{value[:60]!r} has a control character (a newline, a tab, NUL)")
    return value


def strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list of strings, found {value!r}")
    return tuple(string(item) for item in value)


def flag_value(check: Any) -> Any:
    """A converter from a flag parser (UsageError "--flag: message") to one the table reader locates."""

    def convert(value: Any) -> Any:
        try:
            return check(string(value))
        except UsageError as exc:
            raise ValueError(str(exc).split(": ", 1)[-1]) from None

    return convert
