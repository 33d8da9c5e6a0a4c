"""cli/request.py: click's parameters become one frozen request, by name, checked once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import click
import pytest
from click.testing import CliRunner

from builder.cli.request import request_from, takes
from builder.core.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class Flags:
    name: str
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise UsageError(f"--count: {self.count} is not a positive number")


@dataclass(frozen=True, kw_only=True)
class WithShared:
    name: str
    shared: Mapping[str, Any]


def test_the_request_takes_its_fields_by_name() -> None:
    flags = request_from({"name": "a", "count": 2}, Flags)
    assert flags == Flags(name="a", count=2)
    with pytest.raises(FrozenInstanceError):
        flags.count = 3  # type: ignore[misc]


def test_a_field_no_parameter_fills_is_a_mistake_in_the_command() -> None:
    with pytest.raises(TypeError, match="no click parameter for count"):
        request_from({"name": "a"}, Flags)


def test_a_parameter_no_field_takes_is_a_mistake_in_the_command() -> None:
    with pytest.raises(TypeError, match="no field for the click parameter"):
        request_from({"name": "a", "count": 1, "extra": True}, Flags)


def test_shared_receives_the_parameters_the_request_has_no_field_for() -> None:
    found = request_from({"name": "a", "driver": "535", "archs": ()}, WithShared)
    assert found.name == "a"
    assert dict(found.shared) == {"driver": "535", "archs": ()}


def test_the_checks_run_once_when_the_request_is_made() -> None:
    with pytest.raises(UsageError, match="--count: 0"):
        request_from({"name": "a", "count": 0}, Flags)


def test_a_command_body_gets_one_request_and_keeps_its_help() -> None:
    seen: list[Flags] = []

    @click.command("demo")
    @click.option("--name", default="x")
    @click.option("--count", default=1, type=int)
    @takes(Flags)
    def demo(flags: Flags) -> None:
        """Say the flags."""
        seen.append(flags)

    assert CliRunner().invoke(demo, ["--count", "3"]).exit_code == 0
    assert seen == [Flags(name="x", count=3)]
    assert "Say the flags." in CliRunner().invoke(demo, ["--help"]).output
