"""Issue 44 item 7, per item: whole seconds (its group's wall time, every step) beside its docker build's, and the
bytes this run pushed for it: counted where torchyard's client sent them, "not recorded" where docker pushed and
the engine said nothing of its layers (the fake engine here has no push stream; tests/unit/test_push_count.py has
the count from a real stream's events), 0 where nothing was pushed."""

from __future__ import annotations

import json
from pathlib import Path

from publish_kit import (
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
)
from publish_kit import run_publish as run

from builder.core.errors import BuildError
from builder.core.kinds import Status
from builder.publish.report import NOT_RECORDED, write_report


def test_a_docker_push_is_not_recorded_a_skip_pushed_nothing(fakes: PublishFakes, tmp_path: Path) -> None:
    report, _ = run(fakes, tmp_path / "first")
    assert {i.status for i in report.items} == {Status.BUILT}
    assert all(i.pushed_bytes is None for i in report.items)
    assert all(i.seconds >= i.build_seconds > 0 for i in report.items)
    write_report(report, tmp_path / "first.json")
    written = json.loads((tmp_path / "first.json").read_text())["items"]
    assert {i["pushed_bytes"] for i in written} == {NOT_RECORDED}
    again = PublishFakes(fakes.m, fakes.items, registry=fakes.registry)
    report, _ = run(again, tmp_path / "again")
    assert {(i.status, i.pushed_bytes, i.build_seconds) for i in report.items} == {(Status.SKIPPED, 0, 0.0)}
    assert report.as_json()["items"][0]["pushed_bytes"] == 0


def test_a_failed_item_records_no_bytes(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.fault("cu126/torch2.14.1-cu126-py3.11-debian12", fail_build=BuildError("boom"))
    report, _ = run(fakes, tmp_path)
    failed = [i for i in report.items if i.status is Status.FAILED]
    assert failed and all(i.pushed_bytes is None and i.seconds > 0 for i in failed)
