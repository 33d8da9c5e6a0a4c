"""Ctrl-C in publish's main thread stops the other threads' long steps, not just their subprocesses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builder.core.errors import Interrupted
from builder.core.process import check_cancelled, reset_cancel, run_command, stop_all


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    reset_cancel()
    yield
    reset_cancel()


def test_nothing_is_cancelled_until_stop_all() -> None:
    check_cancelled("tagging")
    assert stop_all() == 0
    with pytest.raises(Interrupted, match=r"^interrupted before tagging$"):
        check_cancelled("tagging")


def test_no_new_command_starts_after_stop_all() -> None:
    stop_all()
    with pytest.raises(Interrupted, match=r"^interrupted before running true$"):
        run_command(["true"])
    reset_cancel()
    assert run_command(["true"]).returncode == 0
