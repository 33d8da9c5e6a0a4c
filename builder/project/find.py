"""Which project a command is in: `--project PATH`, else the nearest torchyard.toml from the current folder
upward. The search stops at a repository's root (the folder holding .git: a project never reaches out of its
repository) and at the filesystem root."""

from __future__ import annotations

from pathlib import Path

from builder.core.errors import UsageError
from builder.project.config import FILE

LOCK = "torchyard.lock"


def lock_of(file: Path) -> Path:
    """torchyard.lock beside the torchyard.toml."""
    return file.parent / LOCK


def find_project(start: Path) -> Path | None:
    """The torchyard.toml of the folder `start`, else of the nearest folder above it (None: not in a project)."""
    here = start.absolute()
    for folder in (here, *here.parents):
        candidate = folder / FILE
        if candidate.exists() or candidate.is_symlink():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def given_project(text: str) -> Path:
    """--project PATH: a project folder (with a torchyard.toml) or its torchyard.toml."""
    if not text.strip():
        raise UsageError("--project: empty; give a project folder (or its torchyard.toml)")
    path = Path(text).absolute()
    if not path.exists() and not path.is_symlink() and path.name != FILE:
        raise UsageError(f"--project {text}: no such folder")
    if path.is_dir():
        path = path / FILE
    elif path.name != FILE:
        raise UsageError(f"--project {text}: expected a project folder or its {FILE}")
    if not path.exists():
        raise UsageError(f"--project {text}: no {FILE} there (torchyard init writes one)")
    return path
