"""Unit tier walls (a pytest plugin, loaded by pyproject.toml's addopts): no unit test reads the machine it runs
on, nor its git checkout or clock through the provenance labels. build and render choose for any machine
unless a test gives them a recorded one (host_kit), so their answers do not depend on the GPU of whoever
runs the tests. (A plugin, not a conftest.py: mypy checks one module per name, and tests/integration has
the conftest.py.)"""

from __future__ import annotations

import pytest

import builder.host.probe
from builder.core import env


class _NoMachine:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"a unit test read the real machine (System.{name}): give it a host_kit machine")


@pytest.fixture(autouse=True)
def no_real_machine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "unit" not in request.path.parts:
        return
    monkeypatch.setenv(env.ANY_HOST, "1")
    monkeypatch.setenv(env.PROVENANCE, "0")  # the checkout's commit and the clock: tests that want them set them
    monkeypatch.setattr(builder.host.probe, "RealSystem", _NoMachine)
