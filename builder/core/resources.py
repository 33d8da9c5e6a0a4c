"""Where the packaged data lives: inside the wheel (builder/data) or at the checkout root."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]  # builder/


def data_path(name: str) -> Path:
    """Path of matrix.toml or templates/, for wheel installs and checkouts alike."""
    packaged = _PACKAGE / "data" / name
    if packaged.exists():
        return packaged
    return _PACKAGE.parent / name


def default_matrix_path() -> Path:
    return data_path("matrix.toml")


def templates_path() -> Path:
    return data_path("templates")
