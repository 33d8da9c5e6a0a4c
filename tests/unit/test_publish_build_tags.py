"""Build tags (issue 44 item 2): each pushed image also under <tag>-<YYYYMMDD>, a tag no later run rewrites."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_engine import FakeRegistry, wall_off_the_engine
from publish_kit import (
    REPO,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
)
from publish_kit import run_publish as run

from builder.core.errors import PushError
from builder.publish.build_tags import MAX_PER_DAY, build_tag, today

DAY = "20261205"
RUNTIME = f"{REPO}:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime"


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def test_each_pushed_image_gets_its_build_tag_with_the_same_digest(fakes: PublishFakes, tmp_path: Path) -> None:
    report, log = run(fakes, tmp_path, build_tags=True, build_day=DAY)

    assert not report.failed and len(report.items) == 4
    for item in report.items:
        assert item.build_tag == f"{item.ref}-{DAY}"
        assert fakes.registry.images[item.build_tag] == fakes.registry.images[item.ref], "byte for byte the image"
        assert f"TAG   {item.build_tag} (never rewritten) = {item.ref}" in log
    assert report.as_json()["items"][0]["build_tag"].endswith(f"-{DAY}")


def test_a_rerun_that_builds_nothing_writes_no_build_tag(fakes: PublishFakes, tmp_path: Path) -> None:
    run(fakes, tmp_path, build_tags=True, build_day=DAY)
    written = len(fakes.registry.retagged)
    again, _ = run(fakes, tmp_path / "again", build_tags=True, build_day="20261212")

    assert {i.status for i in again.items} == {"skipped"} and not any(i.build_tag for i in again.items)
    assert len(fakes.registry.retagged) == written and not any("20261212" in r for r in fakes.registry.images)


def test_a_second_build_of_the_day_gets_the_next_number_and_the_first_is_not_rewritten(tmp_path: Path) -> None:
    registry = FakeRegistry({RUNTIME: {}})
    registry.images[RUNTIME] = ("linux/amd64", "sha256:" + "aa" * 32)
    assert build_tag(registry, RUNTIME, DAY) == f"{RUNTIME}-{DAY}"
    assert build_tag(registry, RUNTIME, DAY) == f"{RUNTIME}-{DAY}", "the same digest: the day's tag found again"
    registry.images[RUNTIME] = ("linux/amd64", "sha256:" + "bb" * 32)  # rebuilt the same day
    assert build_tag(registry, RUNTIME, DAY) == f"{RUNTIME}-{DAY}.2"
    assert registry.images[f"{RUNTIME}-{DAY}"][1] == "sha256:" + "aa" * 32, "never rewritten"
    assert registry.images[f"{RUNTIME}-{DAY}.2"][1] == "sha256:" + "bb" * 32


def test_a_tag_not_in_the_registry_a_full_day_or_a_too_long_name_is_refused(tmp_path: Path) -> None:
    registry = FakeRegistry()
    with pytest.raises(PushError, match=r"is not in the registry: no build tag written for it$"):
        build_tag(registry, RUNTIME, DAY)
    registry.images[RUNTIME] = ("linux/amd64", "sha256:" + "aa" * 32)
    for n in range(1, MAX_PER_DAY + 1):
        registry.images[f"{RUNTIME}-{DAY}" + (f".{n}" if n > 1 else "")] = ("linux/amd64", f"sha256:{n:064x}")
    with pytest.raises(PushError, match=rf"{MAX_PER_DAY} builds on {DAY} already have build tags; none is left$"):
        build_tag(registry, RUNTIME, DAY)
    long_ref = f"{REPO}:{'x' * 120}"
    registry.images[long_ref] = ("linux/amd64", "sha256:" + "cc" * 32)
    with pytest.raises(PushError, match=r"longer than 128 characters"):
        build_tag(registry, long_ref, DAY)


def test_a_build_tag_that_cannot_be_written_fails_the_run_and_says_so(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.registry.retag_error = PushError("registry 127.0.0.1:5000 refused to write: 403 Forbidden")
    report, _ = run(fakes, tmp_path, build_tags=True, build_day=DAY, aliases=False)
    assert report.failed and report.untagged
    assert all(why.endswith("403 Forbidden") for why in report.untagged.values())


def test_today_is_the_utc_day() -> None:
    assert today(0) == "19700101" and today(1_780_000_000) == "20260528"
