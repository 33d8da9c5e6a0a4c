"""matrix.toml: load, validate and query the compatibility facts."""

from builder.matrix.loader import load_matrix
from builder.matrix.model import Matrix

__all__ = ["Matrix", "load_matrix"]
