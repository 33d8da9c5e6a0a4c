"""torchyard publish against fake engines at the seam: what is built, pushed and aliased, in which order,
and what a failure anywhere leaves behind (never a tag or alias on an unverified image).

The docker tier (tests/integration/test_publish.py) runs the same scenarios for real; these pin down the
ordering and every branch of the alias rules, which a real run cannot force.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from fake_engine import wall_off_the_engine
from publish_kit import (
    REPO,
    SET,
    PublishFakes,
    fakes_fixture,  # noqa: F401 (the `fakes` fixture)
    fakes_for,
)
from publish_kit import run_publish as run

from builder.core.errors import Interrupted, PushError
from builder.core.kinds import Platform
from builder.pipeline.plan import CONTENT_LABEL
from builder.publish.items import Item, on_platforms
from builder.publish.plan import plan_publish
from builder.publish.report import PublishInterrupted, Report, write_report
from builder.publish.run import PublishSettings, publish

CU130 = "cu130/torch2.14.1-cu130-py3.11-debian12"
CU126 = "cu126/torch2.14.1-cu126-py3.11-debian12"
NEWEST = "newest/torch2.15.0-cu132-py3.11-debian12"
CU130_RUNTIME = f"{REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
CU130_DEVEL = f"{REPO}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-devel"
CU126_RUNTIME = f"{REPO}:2.14.1-cuda12.6-cudnn9-py3.11-debian12-runtime"
NEWEST_RUNTIME = f"{REPO}:2.15.0-cuda13.2-cudnn9-py3.11-debian12-runtime"
IMMUTABLES = {CU130_RUNTIME, CU130_DEVEL, CU126_RUNTIME, NEWEST_RUNTIME}
# Debian 12 is not the default platform (debian13, 3.13): each alias names its Python and OS, and no image of
# the set takes latest-*.
NEWEST_ALIAS = "2.15-cuda13.2-py3.11-debian12-runtime"
ALIASES = {
    "2.14-cuda13.0-py3.11-debian12-runtime": CU130_RUNTIME,
    "2.14-cuda13.0-py3.11-debian12-devel": CU130_DEVEL,
    "2.14-cuda12.6-py3.11-debian12-runtime": CU126_RUNTIME,
    NEWEST_ALIAS: NEWEST_RUNTIME,
}


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def statuses(report: Report) -> dict[str, str]:
    return {i.id: i.status for i in report.items}


def alias_statuses(report: Report) -> dict[str, str]:
    return {a.alias: a.status for a in report.aliases}


def smoke_runs(fakes: PublishFakes) -> Iterator[str]:
    """Images the smoke suite ran in, by image id."""
    for op, args in fakes.ops():
        if op == "run" and any(a.startswith("/torchyard-out/") for a in args):
            yield args[0]


def test_every_image_is_built_verified_pushed_then_every_alias_moves(fakes: PublishFakes, tmp_path: Path) -> None:
    report, log = run(fakes, tmp_path)

    assert not report.failed
    assert set(statuses(report).values()) == {"built"} and len(report.items) == 4
    assert {a.alias: a.target for a in report.aliases} == ALIASES
    assert alias_statuses(report) == dict.fromkeys(ALIASES, "moved")
    assert set(fakes.pushed()) == IMMUTABLES and len(fakes.pushed()) == 4, "the engine pushes immutable tags only"
    assert set(fakes.registry.retagged) == {f"{REPO}:{a}" for a in ALIASES}, "aliases move registry-side"
    for alias, target in ALIASES.items():  # byte for byte the immutable tag's manifest: its signature holds
        assert fakes.registry.images[f"{REPO}:{alias}"] == fakes.registry.images[target]
    assert not any(op == "pull" for op, _ in fakes.ops()), "no image is pulled to move an alias"
    for alias in ALIASES:  # one read of the alias serves the comparison, the size budget and the move
        assert fakes.registry.reads.count(f"{REPO}:{alias}") == 1, fakes.registry.reads
    for ref in IMMUTABLES:  # each pushed image is the one its smoke suite ran in
        assert fakes.registry.refs[ref]
        assert fakes.tagged() >= {ref}
    assert len(set(smoke_runs(fakes))) == 4
    assert any(line.startswith("MOVE  ") for line in log)


def test_one_engine_client_and_one_log_file_per_group(fakes: PublishFakes, tmp_path: Path) -> None:
    run(fakes, tmp_path, jobs=3)

    logs = sorted(p.relative_to(tmp_path / "work").as_posix() for p in (tmp_path / "work").rglob("publish.log"))
    assert logs == sorted(f"{g.replace('/', '__')}/publish.log" for g in (CU130, CU126, NEWEST))
    cu126_log = (tmp_path / "work" / CU126.replace("/", "__") / "publish.log").read_text()
    assert "2.14.1-cuda12.6" in cu126_log and "cuda13" not in cu126_log
    builds = [len(e.of("build")) for e in fakes.engines]
    assert sorted(builds) == [0, 1, 1, 2], "one client per group (+1 for aliases); shared stages in one plan"


def test_a_rerun_builds_and_pushes_nothing(fakes: PublishFakes, tmp_path: Path) -> None:
    run(fakes, tmp_path)
    first_pushes = len(fakes.pushed())
    again, _ = run(fakes, tmp_path / "again")

    assert set(statuses(again).values()) == {"skipped"}
    assert alias_statuses(again) == dict.fromkeys(ALIASES, "unchanged")
    assert len(fakes.pushed()) == first_pushes and len(fakes.registry.retagged) == len(ALIASES)
    assert sum(len(e.of("build")) for e in fakes.engines) == 4


def test_a_failing_smoke_suite_fails_its_group_only_and_holds_its_aliases(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.fault(CU130, smoke_failures={"libs.cudnn": "libcudnn.so.9 did not load"})
    report, log = run(fakes, tmp_path, jobs=2)

    assert report.failed
    failed = {i.id: i.reason for i in report.items if i.status == "failed"}
    assert set(failed) == {"torch2.14.1-cu130-py3.11-debian12-runtime", "torch2.14.1-cu130-py3.11-debian12-devel"}
    assert all("libs.cudnn: libcudnn.so.9 did not load" in why for why in failed.values())
    assert not ({CU130_RUNTIME, CU130_DEVEL} & (fakes.tagged() | set(fakes.pushed())))
    assert set(fakes.pushed()) >= {CU126_RUNTIME, NEWEST_RUNTIME}
    held = {a for a, s in alias_statuses(report).items() if s == "held"}
    assert held == {"2.14-cuda13.0-py3.11-debian12-runtime", "2.14-cuda13.0-py3.11-debian12-devel"}
    assert f"{REPO}:2.14-cuda13.0-py3.11-debian12-runtime" not in fakes.pushed()
    assert any(line.startswith(f"FAIL  {CU130}") for line in log)


def test_a_rejected_push_fails_that_image_and_holds_its_alias(fakes: PublishFakes, tmp_path: Path) -> None:
    denied = PushError(f"push {CU126_RUNTIME}: denied: requested access to the resource is denied")
    fakes.fault(CU126, fail_push=denied)
    report, _ = run(fakes, tmp_path)

    assert statuses(report)["torch2.14.1-cu126-py3.11-debian12-runtime"] == "failed"
    assert "denied" in next(i.reason for i in report.items if i.status == "failed")
    assert CU126_RUNTIME not in fakes.registry.refs
    assert alias_statuses(report)["2.14-cuda12.6-py3.11-debian12-runtime"] == "held"
    assert alias_statuses(report)[NEWEST_ALIAS] == "moved"


def test_a_failed_build_tags_nothing_of_its_group(fakes: PublishFakes, tmp_path: Path) -> None:
    from builder.core.errors import BuildError

    fakes.fault(NEWEST, fail_build=BuildError("docker build failed (exit 1): #9 ERROR: pip install"))
    report, _ = run(fakes, tmp_path)

    assert statuses(report)["torch2.15.0-cu132-py3.11-debian12-runtime"] == "failed"
    assert NEWEST_RUNTIME not in fakes.tagged()
    assert {a for a, s in alias_statuses(report).items() if s == "held"} == {NEWEST_ALIAS}
    assert statuses(report)["torch2.14.1-cu130-py3.11-debian12-runtime"] == "built"


def test_an_alias_that_fails_to_move_is_held_and_named(fakes: PublishFakes, tmp_path: Path) -> None:
    run(fakes, tmp_path, aliases=False)
    fakes.registry.retag_error = PushError("registry 127.0.0.1:5000 refused to write: 503 Service Unavailable")
    report, log = run(fakes, tmp_path / "again")

    assert set(statuses(report).values()) == {"skipped"}
    assert set(alias_statuses(report).values()) == {"held"}
    assert all("503" in a.reason for a in report.aliases)
    assert any(line.startswith("FAIL  alias") for line in log)


def test_no_aliases_pushes_only_immutable_tags(fakes: PublishFakes, tmp_path: Path) -> None:
    report, _ = run(fakes, tmp_path, aliases=False)

    assert report.aliases == []
    assert set(fakes.pushed()) == IMMUTABLES


def test_no_push_tags_aliases_locally_and_pushes_nothing(fakes: PublishFakes, tmp_path: Path) -> None:
    report, _ = run(fakes, tmp_path, push=False)

    assert fakes.pushed() == [] and fakes.registry.refs == {}
    assert alias_statuses(report) == dict.fromkeys(ALIASES, "moved")
    for alias, target in ALIASES.items():
        assert fakes.tagged() >= {f"{REPO}:{alias}", target}
        assert fakes._tags[f"{REPO}:{alias}"] == fakes._tags[target]


def test_aliases_only_moves_what_the_registry_holds_and_holds_the_rest(fakes: PublishFakes, tmp_path: Path) -> None:
    run(fakes, tmp_path, aliases=False)
    del fakes.registry.refs[CU126_RUNTIME]
    builds = sum(len(e.of("build")) for e in fakes.engines)
    report, log = run(fakes, tmp_path / "aliases", aliases_only=True)

    assert sum(len(e.of("build")) for e in fakes.engines) == builds, "--aliases-only builds nothing"
    assert statuses(report)["torch2.14.1-cu126-py3.11-debian12-runtime"] == "failed"
    assert alias_statuses(report) == dict.fromkeys(ALIASES, "moved") | {"2.14-cuda12.6-py3.11-debian12-runtime": "held"}
    assert f"MISS  {CU126_RUNTIME}: not published with this content" in log


def test_ctrl_c_during_a_build_raises_interrupted_and_nothing_is_tagged_or_moved(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    fakes.fault(CU130, fail_build=KeyboardInterrupt())
    with pytest.raises(Interrupted, match="run the same publish again"):
        run(fakes, tmp_path)
    assert not ({CU130_RUNTIME, CU130_DEVEL} & fakes.tagged())
    assert not any(":2.14-" in ref or ":2.15-" in ref for ref in fakes.pushed())


def test_an_interrupted_run_still_reports_each_item_as_its_group_left_it(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.fault(CU130, fail_build=KeyboardInterrupt())
    with pytest.raises(PublishInterrupted) as raised:
        run(fakes, tmp_path)  # one job: the groups run in order
    report = raised.value.report
    assert raised.value.exit_code == 130
    stopped = CU130.split("/")[1]  # the group's combination: its runtime and devel items
    reasons = {i.id: (i.status, i.reason) for i in report.items}
    assert {r for i, r in reasons.items() if i.startswith(stopped)} == {("failed", "interrupted before it finished")}
    # the others never started, or stopped at their next step (the next group may have begun as the first was stopped)
    others = {r for i, r in reasons.items() if not i.startswith(stopped)}
    assert ("failed", "interrupted before it started") in others
    assert all(status == "failed" and reason.startswith("interrupted before") for status, reason in others)
    assert len(reasons) == len(fakes.items) == 4
    assert {a.status for a in report.aliases} == {"held"} and len(report.aliases) == len(ALIASES)
    write_report(report, tmp_path / "report.json")
    assert json.loads((tmp_path / "report.json").read_text())["summary"]["failed"] == len(fakes.items)


def test_the_json_report_counts_and_lists_everything(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.fault(CU126, smoke_failures={"train.cpu": "loss did not halve"})
    report, _ = run(fakes, tmp_path)
    path = tmp_path / "report.json"
    write_report(report, path)

    data = json.loads(path.read_text())
    assert {k: v for k, v in data["summary"].items() if k != "seconds"} == {"built": 3, "failed": 1}
    item = next(i for i in data["items"] if i["status"] == "failed")
    assert item["id"] == "torch2.14.1-cu126-py3.11-debian12-runtime" and "train.cpu" in item["reason"]
    built = next(i for i in data["items"] if i["id"] == "torch2.15.0-cu132-py3.11-debian12-runtime")
    assert built["ref"] == NEWEST_RUNTIME and built["smoke"]["passed"] >= 1 and built["digest"].startswith("sha256:")
    assert {a["alias"]: a["status"] for a in data["aliases"]}["2.14-cuda12.6-py3.11-debian12-runtime"] == "held"


def test_an_alias_naming_an_image_with_older_content_moves_to_the_new_one(fakes: PublishFakes, tmp_path: Path) -> None:
    """The gate `registry.holds(alias, content_hash)`: an alias left on last month's image must move."""
    run(fakes, tmp_path)
    stale = f"{REPO}:{NEWEST_ALIAS}"
    fakes.registry.refs[stale] = fakes.registry.refs[stale] | {CONTENT_LABEL: "sha256:" + "0" * 64}
    fakes.registry.images[stale] = ("linux/amd64", "sha256:" + "1" * 64)
    pushes_before = len(fakes.pushed())

    again, log = run(fakes, tmp_path / "again")

    assert alias_statuses(again)[NEWEST_ALIAS] == "moved"
    assert {a for a, s in alias_statuses(again).items() if s == "unchanged"} == set(ALIASES) - {NEWEST_ALIAS}
    assert fakes.pushed()[pushes_before:] == [] and fakes.registry.retagged[len(ALIASES) :] == [stale]
    assert fakes.registry.images[stale] == fakes.registry.images[NEWEST_RUNTIME]
    assert fakes.registry.refs[stale][CONTENT_LABEL] == fakes.registry.refs[NEWEST_RUNTIME][CONTENT_LABEL]
    assert f"MOVE  {stale} -> {NEWEST_RUNTIME} ({fakes.registry.images[NEWEST_RUNTIME][1]})" in log


def test_an_alias_on_another_digest_with_the_same_content_is_repaired(fakes: PublishFakes, tmp_path: Path) -> None:
    """Issue 44: an alias re-pushed through the engine carries the right content label on another, unsigned
    manifest; the content label cannot tell, the digest can."""
    run(fakes, tmp_path)
    wrong = f"{REPO}:{NEWEST_ALIAS}"
    fakes.registry.images[wrong] = ("linux/amd64", "sha256:" + "a8" * 32)

    again, _ = run(fakes, tmp_path / "again")

    assert alias_statuses(again)[NEWEST_ALIAS] == "moved"
    assert fakes.registry.images[wrong] == fakes.registry.images[NEWEST_RUNTIME]


def test_the_set_is_planned_once_before_anything_runs(fakes: PublishFakes) -> None:
    pplan = plan_publish(fakes.m, fakes.items, [])

    assert [g.name for g in pplan.groups] == [CU130, CU126, NEWEST]
    assert [len(g.items) for g in pplan.groups] == [2, 1, 1]
    owners = {a.alias: f"{REPO}:{pplan.group_of(a.owner).immutable(a.owner)}" for a in pplan.aliases}
    assert owners == ALIASES
    assert [i.id for i in pplan.items] == [i.id for i in fakes.items]


def test_a_group_that_cannot_be_planned_fails_alone(fakes: PublishFakes, tmp_path: Path) -> None:
    pplan = plan_publish(fakes.m, fakes.items, [])
    broken = pplan.groups[1]
    pplan = replace(
        pplan, groups=(pplan.groups[0], replace(broken, plan=None, problem="no base image"), *pplan.groups[2:])
    )
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "work")
    report = publish(pplan, settings, list[str]().append, fakes.factory, fakes.registry_for)

    assert statuses(report)[broken.items[0].id] == "failed"
    assert [i.reason for i in report.items if i.status == "failed"] == ["no base image"]
    assert alias_statuses(report)["2.14-cuda12.6-py3.11-debian12-runtime"] == "held"
    assert alias_statuses(report)[NEWEST_ALIAS] == "moved"


def test_aliases_only_reports_each_item_with_its_reference_and_reason(fakes: PublishFakes, tmp_path: Path) -> None:
    # written for the survivors of `bench/mutation.py publish` (docs/mutation.md)
    run(fakes, tmp_path, aliases=False)
    del fakes.registry.refs[CU126_RUNTIME]
    report, _ = run(fakes, tmp_path / "aliases", aliases_only=True)
    by_id = {i.id: i for i in report.items}
    missing = by_id["torch2.14.1-cu126-py3.11-debian12-runtime"]
    assert (missing.status, missing.ref, missing.reason) == (
        "failed",
        CU126_RUNTIME,
        "not in the registry with this content",
    )
    held = [i for i in report.items if i.status == "skipped"]
    assert len(held) == len(report.items) - 1
    assert all(i.ref.startswith(f"{REPO}:") and i.id.startswith("torch2.") for i in held)
    assert {i.ref for i in held} >= {NEWEST_RUNTIME}


def test_the_json_report_rounds_seconds_to_a_tenth_and_is_indented(tmp_path: Path) -> None:
    report = Report([], [], 12.345)
    assert report.as_json()["summary"] == {"seconds": 12.3}
    path = tmp_path / "report.json"
    write_report(report, path)
    assert path.read_text().startswith('{\n  "schema": 1,\n  "total": 0,\n  "summary": {\n    "seconds": 12.3\n  },')


def test_on_platforms_keeps_the_items_of_the_platforms_asked_or_all() -> None:
    amd, arm = (cast(Item, SimpleNamespace(combo=SimpleNamespace(platform=p))) for p in Platform)
    assert on_platforms([amd, arm], (Platform.ARM64,)) == [arm]
    assert on_platforms([amd, arm], (Platform.AMD64,)) == [amd]
    assert on_platforms([amd, arm], ()) == [amd, arm]


def test_each_alias_result_names_its_target_and_how_it_moved(fakes: PublishFakes, tmp_path: Path) -> None:
    local, log = run(fakes, tmp_path, push=False)
    assert {(a.alias, a.status, a.target, a.reason) for a in local.aliases} == {
        (alias, "moved", target, "locally (no push)") for alias, target in ALIASES.items()
    }
    assert all(f"MOVE  {REPO}:{alias} -> {target} (local only)" in log for alias, target in ALIASES.items())
    run(fakes, tmp_path / "first")
    again, _ = run(fakes, tmp_path / "again")  # the registry holds every alias with this content already
    assert {(a.alias, a.status, a.target) for a in again.aliases} == {
        (alias, "unchanged", target) for alias, target in ALIASES.items()
    }


def test_aliases_only_fails_each_item_of_a_group_that_cannot_be_planned_and_checks_the_rest(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    run(fakes, tmp_path, aliases=False)
    pplan = plan_publish(fakes.m, fakes.items, [])
    broken = pplan.groups[0]  # two items: each fails with the group's reason
    pplan = replace(pplan, groups=(replace(broken, plan=None, problem="no base image"), *pplan.groups[1:]))
    settings = PublishSettings(repo=REPO, out_root=tmp_path / "again", aliases_only=True)
    report = publish(pplan, settings, list[str]().append, fakes.factory, fakes.registry_for)
    by_id = {i.id: (i.status, i.reason) for i in report.items}
    assert [by_id[item.id] for item in broken.items] == [("failed", "no base image")] * 2
    assert {by_id[item.id][0] for group in pplan.groups[1:] for item in group.items} == {"skipped"}


def test_aliases_only_on_another_machine_moves_them_registry_side_pulling_nothing(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    run(fakes, tmp_path)
    for alias in ALIASES:
        del fakes.registry.refs[f"{REPO}:{alias}"], fakes.registry.images[f"{REPO}:{alias}"]
    fresh = PublishFakes(fakes.m, fakes.items, registry=fakes.registry)  # another machine: nothing local
    report, _ = run(fresh, tmp_path / "fresh", aliases_only=True)
    assert alias_statuses(report) == dict.fromkeys(ALIASES, "moved")
    assert [op for op, _ in fresh.ops() if op in ("pull", "push", "tag")] == []
    for alias, target in ALIASES.items():
        assert fakes.registry.images[f"{REPO}:{alias}"] == fakes.registry.images[target]


def test_a_registry_that_refuses_pushes_fails_the_run_before_any_build(fakes: PublishFakes, tmp_path: Path) -> None:
    fakes.registry.push_refusal = PushError("registry 127.0.0.1:5000 will not take a push to team/torch: HTTP 405")
    with pytest.raises(PushError) as caught:
        run(fakes, tmp_path)
    assert caught.value.exit_code == 5
    assert [op for op, _ in fakes.ops() if op in ("build", "push", "tag")] == []
    from builder.cli.publish_cmd import _stopped  # what the command writes as the report on that exit

    stopped = _stopped(plan_publish(fakes.m, fakes.items, []), caught.value)
    assert {i.status for i in stopped.items} == {"failed"} and stopped.aliases
    assert {a.status for a in stopped.aliases} == {"held"}
    assert (
        stopped.items[0].reason
        == "the run stopped: registry 127.0.0.1:5000 will not take a push to team/torch: HTTP 405"
    )


def test_an_arch_the_published_torch_lacks_fails_the_next_run_without_a_build(
    fakes: PublishFakes, tmp_path: Path
) -> None:
    """Issue 44: require_archs is checked at plan time against matrix.toml, so it reaches images already published
    (the in-image check runs only when an image is built)."""
    run(fakes, tmp_path)
    (tmp_path / "strict").mkdir()
    strict_set = SET.replace('name = "cu130"\n', 'name = "cu130"\nrequire_archs = ["sm_70"]\n')
    strict = fakes_for(strict_set, tmp_path / "strict")
    again = PublishFakes(strict.m, strict.items, registry=fakes.registry)  # the same registry, nothing local
    report, _ = run(again, tmp_path / "again")
    failed = {i.id: i.reason for i in report.items if i.status == "failed"}
    assert set(failed) == {"torch2.14.1-cu130-py3.11-debian12-runtime", "torch2.14.1-cu130-py3.11-debian12-devel"}
    prefix = "require_archs sm_70: torch 2.14.1+cu130 carries no code for it ("
    assert all(r.startswith(prefix) for r in failed.values()), failed
    assert report.failed and [op for op, _ in again.ops() if op == "build"] == []


def _planted(fakes: PublishFakes, tmp_path: Path, percent: float) -> None:
    """A first publish, then the newest image rebuilt with a new layer `percent` bigger than the one its alias names."""
    run(fakes, tmp_path / "first")
    alias = f"{REPO}:{NEWEST_ALIAS}"
    base = {"sha256:" + "11" * 32: 600_000_000, "sha256:" + "22" * 32: 400_000_000}
    fakes.registry.sizes[alias] = base
    fakes.registry.images[alias] = ("linux/amd64", "sha256:" + "0d" * 32)  # last week's image
    grown = {"sha256:" + "11" * 32: 600_000_000, "sha256:" + "33" * 32: int(400_000_000 + percent * 10_000_000)}
    fakes.registry.sizes[NEWEST_RUNTIME] = grown


def test_an_image_past_the_size_budget_holds_its_alias_and_fails_the_run(fakes: PublishFakes, tmp_path: Path) -> None:
    _planted(fakes, tmp_path, 6)
    report, log = run(fakes, tmp_path / "again")
    held = next(a for a in report.aliases if a.alias == NEWEST_ALIAS)
    assert (held.status, held.over_budget) == ("held", True) and report.failed
    assert held.reason == ("its image grew past the 5 % size budget: 1000.0 MB -> 1060.0 MB (+6.0 %); new layers: "
                           "sha256:333333333333 460.0 MB (--allow-growth accepts it)")  # fmt: skip
    assert fakes.registry.images[f"{REPO}:{NEWEST_ALIAS}"][1] == "sha256:" + "0d" * 32, "the alias did not move"
    assert (
        f"SIZE  {REPO}:{NEWEST_ALIAS}: 1000.0 MB -> 1060.0 MB (+6.0 %); new layers: sha256:333333333333 460.0 MB" in log
    )


@pytest.mark.parametrize(("percent", "budget"), [(4, 5.0), (6, None), (6, 10.0)])
def test_growth_within_the_budget_or_allowed_moves_the_alias(
    fakes: PublishFakes, tmp_path: Path, percent: float, budget: float | None
) -> None:
    _planted(fakes, tmp_path, percent)
    report, _ = run(fakes, tmp_path / "again", size_budget=budget)
    assert alias_statuses(report)[NEWEST_ALIAS] == "moved" and not report.failed
