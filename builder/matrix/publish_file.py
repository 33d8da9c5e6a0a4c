"""The publish set in its own file: publish.toml beside matrix.toml, or the file --publish-set names.

The set is the team's policy and matrix.toml upstream's facts: with its own file a team publishes its images from
the facts file as it is, never a fork of it. When the file is there it is the publish set, and matrix.toml's own
[[publish]] entries (if any) are ignored, with one note saying so. Its errors name the file and line, as
matrix.toml's do; its entries are checked against the matrix as matrix.toml's are.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from builder.core.errors import MatrixError
from builder.matrix import reader as r
from builder.matrix.model import Matrix
from builder.matrix.publish_check import check_platforms
from builder.matrix.publish_set import check_publish, parse_ci, parse_publish
from builder.matrix.reader import Context, Entry

PUBLISH_FILE = "publish.toml"
SCHEMA = 1
_TOP = ("schema", "publish", "ci")


def publish_file_of(matrix_path: str, named: str | None) -> Path | None:
    """The file the publish set is read from: the one named, else publish.toml beside the matrix, else none (the
    matrix's own entries)."""
    if named is not None:
        path = Path(named)
        if not path.is_file():
            raise MatrixError(f"{named}: no such publish set file (--publish-set)")
        return path
    beside = Path(matrix_path).parent / PUBLISH_FILE
    return beside if beside.is_file() else None


def with_publish_file(m: Matrix, ctx: Context, doc: dict[str, Any]) -> Matrix:
    """The matrix with the set (and [ci] table) of the parsed publish file in place of its own."""
    top = Entry(ctx, (), "publish set", doc, _TOP)
    if top.get("schema", r.integer, SCHEMA) != SCHEMA:
        top.fail_key("schema", f"schema {doc['schema']} is not supported (this torchyard reads schema {SCHEMA})")
    entries = parse_publish(ctx, doc.get("publish", []))
    ignored = len(m.publish)
    note = (
        f"publish set: {ctx.file}; {Path(m.path).name}'s own [[publish]] entries ({ignored}) are ignored"
        if ignored
        else ""
    )
    found = replace(m, publish=entries, publish_file=ctx.file, publish_note=note, ci=parse_ci(ctx, doc.get("ci", {})))
    check_publish(
        ctx, entries, [o.name for o in m.os], {v.name for t in m.torch for v in t.variants}, {a.name for a in m.archs}
    )
    check_platforms(ctx, found)
    return found
