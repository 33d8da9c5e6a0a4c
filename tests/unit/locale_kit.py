"""The C locale, for the unit tests that prove a file is read or written as UTF-8 whatever the locale (a
pytest plugin loaded by pyproject.toml's addopts, as unit_walls is: its fixture `c_locale` is there for every test
that names it)."""

from __future__ import annotations

import locale
from collections.abc import Iterator

import pytest


@pytest.fixture
def c_locale() -> Iterator[None]:
    """The C locale's character set (ASCII) for text files opened without an explicit encoding."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
