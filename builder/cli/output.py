"""Plain-text tables and JSON printing for the commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)


SCHEMA = 1  # the version of every JSON document torchyard prints or writes (docs/schemas.md)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def document(data: dict[str, Any], total_of: str | None = None) -> dict[str, Any]:
    """A JSON document as scripts get it: an object with a schema version first (and a list's total)."""
    head: dict[str, Any] = {"schema": SCHEMA}
    if total_of is not None:
        head["total"] = len(data[total_of])
    return head | data
