"""Fixtures shared by several unit-test modules (each module's own fixtures stay in it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from publish_kit import SET, PublishFakes, fakes_for

from builder.core.process import reset_cancel


@pytest.fixture
def fakes(tmp_path: Path) -> Iterator[PublishFakes]:
    """The publish set SET over a fake engine and registry (tests/unit/publish_kit.py)."""
    yield fakes_for(SET, tmp_path)
    # a Ctrl-C test leaves the process-wide cancel flag set (the CLI exits then): a later build in this pytest
    # process would stop "before tagging" (seen when mutmut's fast_first ran the tests in another order)
    reset_cancel()
