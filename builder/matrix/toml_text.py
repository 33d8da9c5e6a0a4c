"""TOML parsing for the loader (tomllib, with its errors and a bound on nesting turned into one line)."""

from __future__ import annotations

from typing import Any


class TomlSyntaxError(ValueError):
    """tomllib's message, "... (at line L, column C)"."""


def parse_toml(text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlSyntaxError(str(exc)) from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise TomlSyntaxError("arrays or tables nest too deeply") from None
