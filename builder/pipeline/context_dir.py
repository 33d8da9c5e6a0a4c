"""The build context on disk: torchyard owns its output folder and writes nothing outside it.

- It writes into an empty or new folder, or one it wrote before (its record, .torchyard-written, says so);
  any other non-empty folder is refused unless --force.
- Whatever it wrote last time is removed first, but only names the record lists that are plain names inside
  the folder (the record is checked, not trusted); logs and reports stay.
- Everything is staged in a temporary folder inside the output and moved into place; a failure leaves
  nothing behind, and a lock lets renders into one folder run at the same time.
- Extension folders, and the local sources requirements name (req/...), are copied by the checked walk of
  builder/pipeline/extension_dir.py (links kept only inside the folder; no special files; size limits), the same
  walk the content hash reads.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core.errors import RenderError, UsageError
from builder.core.files import write_file
from builder.pipeline.extension_dir import walk_source

if TYPE_CHECKING:
    from builder.pipeline.plan import Plan
    from builder.pipeline.project_plan import ProjectPlan

RECORD = ".torchyard-written"  # what the last write put here, so a re-render leaves nothing stale
LOCK = ".torchyard.lock"
_STAGING = ".torchyard-staging-"
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}|\.dockerignore", re.ASCII)


def write_context(plan: Plan | ProjectPlan, out_dir: Path, *, force: bool = False) -> Path:
    """Write the Dockerfile, context files and extension sources; returns the Dockerfile path."""
    _prepare(out_dir, force)
    with _locked(out_dir):
        staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=out_dir))
        try:
            written = _stage(plan, staging, out_dir)
            _remove_recorded(out_dir)
            for name in written:
                _clear(out_dir / name)  # a name this write owns now (the folder is ours, or --force said so)
                os.replace(staging / name, out_dir / name)
            write_file(out_dir / RECORD, "\n".join(sorted(written)) + "\n")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir / "Dockerfile"


def check_output(out_dir: Path, force: bool) -> None:
    """What write_context would refuse, without writing anything (dry runs check it too)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"-o {out_dir}: exists and is not a folder")
    if out_dir.is_dir():
        _check_ours(out_dir, force)


def _prepare(out_dir: Path, force: bool) -> None:
    check_output(out_dir, force)
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_ours(out_dir, force)


def _check_ours(out_dir: Path, force: bool) -> None:
    names = [p.name for p in out_dir.iterdir()]  # one listing: a render running beside this one may be writing
    ours = RECORD in names or LOCK in names
    others = [n for n in names if not n.startswith(_STAGING) and n != LOCK]
    if others and not ours and not force:
        raise UsageError(
            f"-o {out_dir}: a folder torchyard did not write, and not empty ({', '.join(sorted(others)[:3])}"
            f"{' ...' if len(others) > 3 else ''}): give an empty or new folder, or --force"
        )


@contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    fd = os.open(out_dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _stage(plan: Plan | ProjectPlan, staging: Path, out_dir: Path) -> list[str]:
    """Everything written into the staging folder; a write that fails (a full disk) names the file as it would
    be in -o, and nothing of the half-written staging folder is moved there."""
    write_file(staging / "Dockerfile", plan.dockerfile, shown=out_dir / "Dockerfile")
    for name, data in plan.context_files:
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, data, shown=out_dir / name)
    for name, source, flag in plan.copies:
        try:
            _copy_extension(source, staging / name, flag)
        except OSError as exc:
            raise UsageError(f"{out_dir / name}: cannot write: {exc.strerror or exc}") from None
    ignore = "plan.json\n*.log\nsmoke-*.json\nproject\n" + RECORD + "\n" + LOCK + "\n"
    write_file(staging / ".dockerignore", ignore, shown=out_dir / ".dockerignore")
    return sorted(p.name for p in staging.iterdir())


def _copy_extension(source: Path, dest: Path, flag: str) -> None:
    nodes = walk_source(source, flag)
    if nodes and nodes[0].rel == "":  # one file: a wheel or sdist
        dest.parent.mkdir(parents=True, exist_ok=True)
        _copy_file(source, dest, nodes[0].size, flag)
        return
    dest.mkdir(parents=True)
    for node in nodes:
        path = dest / node.rel
        if node.kind == "dir":
            path.mkdir()
        elif node.kind == "link":
            path.symlink_to(node.target)
        else:
            _copy_file(source / node.rel, path, node.size, flag)


def _copy_file(source: Path, dest: Path, size: int, flag: str) -> None:
    """The regular file walked, opened without following a link swapped in since, no more than its size."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise RenderError(f"{flag}: {source} changed while it was copied")
        dest.write_bytes(handle.read(size + 1)[:size])


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _remove_recorded(out_dir: Path) -> None:
    """Remove what the last write recorded: plain names directly inside out_dir, nothing else."""
    record = out_dir / RECORD
    if not record.is_file() or record.is_symlink():
        return
    text = record.read_text(errors="replace")[:65536]
    for name in text.split("\n"):
        if _PLAIN.fullmatch(name) and name not in (RECORD, LOCK):
            _clear(out_dir / name)
