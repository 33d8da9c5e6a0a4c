"""Typed reading of one TOML table: required/optional keys, converters, located one-line errors."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from builder.core.archs import Arch, arch_from
from builder.core.errors import MatrixError
from builder.core.kinds import did_you_mean
from builder.core.versions import Driver, driver_version, release
from builder.matrix.locate import KeyPath, Locator

T = TypeVar("T")
_MISSING: Any = object()


@dataclass(frozen=True)
class Context:
    """The file being read: its name, and its text for locating errors."""

    file: str
    text: str

    @functools.cached_property
    def locator(self) -> Locator:
        """Built on first use: only an error needs a line number."""
        return Locator(self.text)

    def fail(self, path: KeyPath, label: str, message: str) -> NoReturn:
        line = self.locator.line_of(path)
        where = f"{self.file}:{line}" if line else self.file
        raise MatrixError(f"{where}: {label}: {message}")


class Entry:
    """One table of the document; unknown keys are refused as soon as it is opened."""

    def __init__(self, ctx: Context, path: KeyPath, label: str, raw: object, allowed: Iterable[str]) -> None:
        if not isinstance(raw, dict):
            ctx.fail(path, label, f"expected a table, found {type(raw).__name__}")
        self.ctx, self.path, self.label, self.raw = ctx, path, label, raw
        allowed = tuple(allowed)
        for key in raw:
            if key not in allowed:
                self.fail_key(key, f"unknown key {key!r}{did_you_mean(key, allowed)}")

    def fail_key(self, key: str, message: str) -> NoReturn:
        self.ctx.fail((*self.path, key), f"{self.label}.{key}", message)

    def get(self, key: str, convert: Callable[[Any], T], default: T = _MISSING) -> T:
        if key not in self.raw:
            if default is _MISSING:
                self.ctx.fail(self.path, self.label, f"missing required key {key!r}")
            return default
        try:
            return convert(self.raw[key])
        except (ValueError, TypeError) as exc:
            self.fail_key(key, str(exc))


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, found {value!r}")
    return value


def integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, found {value!r}")
    return value


def version(value: Any) -> Version:
    return release(text(value))


def minor_version(value: Any) -> Version:
    parsed = version(value)
    if len(parsed.release) != 2:
        raise ValueError(f"expected MAJOR.MINOR like 12.4, found {value!r}")
    return parsed


def year_month(value: Any) -> tuple[int, int]:
    """A month, as lifecycles are announced: "2028-06" -> (2028, 6)."""
    found = re.fullmatch(r"(\d{4})-(\d{2})", text(value))
    if found is None or not 1 <= int(found[2]) <= 12:
        raise ValueError(f"expected a month YYYY-MM like 2028-06, found {value!r}")
    return int(found[1]), int(found[2])


def driver(value: Any) -> Driver:
    """A full driver version (525.60.13); a bare branch is too vague for a fact."""
    try:
        parsed = driver_version(text(value))
    except ValueError:
        parsed = None
    if parsed is None or not parsed.exact:
        raise ValueError(f"expected a full driver version like 525.60.13, found {value!r}")
    return parsed


def driver_floors(value: Any) -> tuple[Driver, ...]:
    """The first driver of each branch that has it ("570.124.04" or ["570.148.08", "575.51.02"]); one per
    branch, oldest first."""
    floors = tuple(driver(item) for item in ([value] if isinstance(value, str) else _list(value)))
    branches = [f.branch for f in floors]
    if not floors or branches != sorted(set(branches)):
        raise ValueError(f"expected driver versions of distinct branches, oldest first, found {value!r}")
    return floors


def spec(value: Any) -> SpecifierSet:
    try:
        return SpecifierSet(text(value))
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is not a version specifier like '>=9.0,<9.6'") from None


def arch(value: Any) -> Arch:
    return arch_from(text(value))


def arch_list(value: Any) -> tuple[Arch, ...]:
    return tuple(arch(item) for item in _list(value))


def text_list(value: Any) -> tuple[str, ...]:
    return tuple(text(item) for item in _list(value))


def int_list(value: Any) -> tuple[int, ...]:
    return tuple(integer(item) for item in _list(value))


def sources(value: Any) -> tuple[str, ...]:
    return (text(value),) if isinstance(value, str) else text_list(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, found {value!r}")
    return value
