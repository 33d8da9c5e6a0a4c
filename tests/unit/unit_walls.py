"""Unit tier walls (a pytest plugin, loaded by pyproject.toml's addopts): no unit test reads the machine it runs
on, nor its git checkout or clock through the provenance labels. build and render choose for any machine
unless a test gives them a recorded one (host_kit), so their answers do not depend on the GPU of whoever
runs the tests. (A plugin, not a conftest.py: mypy checks one module per name, and tests/integration has
the conftest.py.)"""

from __future__ import annotations

import pytest

import builder.engine.images
import builder.engine.quick
import builder.host.probe
from builder.core import env
from builder.core.errors import EngineError

UNIT_TODAY = "2026-12-04"  # the day the unit tier judges driver branch and OS lifecycles on


class _NoMachine:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"a unit test read the real machine (System.{name}): give it a host_kit machine")


@pytest.fixture(autouse=True)
def no_real_machine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "unit" not in request.path.parts:
        return
    monkeypatch.setenv(env.ANY_HOST, "1")
    monkeypatch.setenv(env.PROVENANCE, "0")  # the checkout's commit and the clock: tests that want them set them
    monkeypatch.setenv(env.TODAY, UNIT_TODAY)  # lifecycles are judged on a fixed day, not the clock
    monkeypatch.setattr(builder.host.probe, "RealSystem", _NoMachine)
    for engine in (builder.engine.images.Images, builder.engine.quick.QuickEngine):
        monkeypatch.setattr(engine, "labelled", _no_engine_images)


def _no_engine_images(self: object, label: str) -> list[object]:
    """The locator's list of the engine's images: the unit tier has no engine (a test that wants images gives the
    command a fake one, host_kit.RunEngine), whatever the machine running the tests holds."""
    raise EngineError("no Docker engine in the unit tier")
