"""`publish --plan` (builder/publish/preview.py): what a publish would build, skip and move, asked of the registry
(the fakes' registry at the seam) before anything runs, and that it runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import wall_off_the_engine
from publish_kit import (
    REPO,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
    run_publish,
)
from test_publish_run import ALIASES, NEWEST_ALIAS, NEWEST_RUNTIME

import builder.pipeline.registry
from builder.cli.main import main
from builder.publish.plan import plan_publish
from builder.publish.preview import AFTER, BUILD, MOVE, NEW, SKIP, UNCHANGED, preview


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def _preview(fakes: PublishFakes) -> dict[str, dict[str, str]]:
    found = preview(plan_publish(fakes.m, fakes.items, []), fakes.registry, REPO)
    data = found.as_json()
    return {"items": {i["id"]: i["action"] for i in data["items"]}} | {
        "aliases": {a["alias"]: f"{a['action']} {a['before']} -> {a['after']}" for a in data["aliases"]}
    }


def test_an_empty_registry_builds_everything_and_each_alias_moves_after_its_build(fakes: PublishFakes) -> None:
    seen = _preview(fakes)
    assert set(seen["items"].values()) == {BUILD} and len(seen["items"]) == len(fakes.items)
    assert seen["aliases"] == dict.fromkeys(ALIASES, f"{AFTER}  -> {NEW}")
    assert fakes.ops() == [], "a plan runs nothing"


def test_after_a_publish_everything_is_skipped_and_unchanged_then_a_wrong_alias_shows_both_digests(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    run_publish(fakes, tmp_path)
    seen = _preview(fakes)
    assert set(seen["items"].values()) == {SKIP}
    assert {a.split()[0] for a in seen["aliases"].values()} == {UNCHANGED}
    wrong = "sha256:" + "a8" * 32
    fakes.registry.images[f"{REPO}:{NEWEST_ALIAS}"] = ("linux/amd64", wrong)
    right = fakes.registry.images[NEWEST_RUNTIME][1]
    assert _preview(fakes)["aliases"][NEWEST_ALIAS] == f"{MOVE} {wrong} -> {right}"


def test_the_markdown_lists_each_item_and_alias_with_a_count(fakes: PublishFakes, tmp_path: Path) -> None:
    run_publish(fakes, tmp_path)
    text = preview(plan_publish(fakes.m, fakes.items, []), fakes.registry, REPO).markdown()
    assert text.startswith(f"## torchyard publish plan: {REPO}\n")
    assert f"| `{NEWEST_ALIAS}` | unchanged | `{NEWEST_RUNTIME}` |" in text
    assert text.endswith(f"0 to build, {len(fakes.items)} up to date, 0 cannot be planned; 0 of {len(ALIASES)} "
                         "aliases would move.\n")  # fmt: skip


def test_the_cli_prints_the_markdown_and_writes_the_json(
    fakes: PublishFakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(builder.pipeline.registry, "Registry", lambda auth: fakes.registry)
    report = tmp_path / "plan.json"
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", fakes.m.path, "publish", "--plan", "--repo", REPO, "--report", str(report)])
    out, err = capsys.readouterr()
    assert exit_.value.code == 0, err
    assert out.startswith(f"## torchyard publish plan: {REPO}\n")
    data = json.loads(report.read_text())
    assert {i["action"] for i in data["items"]} == {BUILD} and len(data["aliases"]) == len(ALIASES)


@pytest.mark.parametrize("other", ["--dry-run", "--no-push", "--aliases-only"])
def test_plan_goes_with_no_flag_that_changes_what_it_asks(other: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["publish", "--plan", other])
    assert exit_.value.code == 2
    assert "--plan asks the registry what a publish would do" in capsys.readouterr().err
