"""The edges of publishing multi-platform images (written for the survivors of `bench/mutation.py publish`,
docs/mutation.md): an index whose platform could not be planned, an index signed with the publish's key, an
alias whose index was held or refused, and the results and lines of each. Fakes at the seam."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_engine import wall_off_the_engine
from publish_kit import BOTH, REPO, TWO, PublishFakes, fakes_for, planning_fails
from publish_kit import run_publish as run

import builder.publish.run as publish_run
from builder.core.kinds import AliasStatus, Platform, Status
from builder.pipeline.multiplatform import IndexResult
from builder.publish.plan import plan_publish
from builder.publish.report import ItemResult
from builder.publish.run import PublishSettings
from builder.render.tags import ImageTags
from builder.trust.attest import TrustSettings

# The newest torch on the default platform (Debian 13, its own Python 3.13): aliases 2.15-cuda13.2-runtime and latest.
NEWEST = """
[[publish]]
name = "newest"
torch = "==2.15.0"
os = ["debian13"]
flavors = ["runtime"]
"""
AMD64_ID, ARM64_ID = "torch2.14.1-cu130-py3.11-debian12-runtime", "torch2.14.1-cu130-py3.11-debian12-arm64-runtime"
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
ALIAS = "2.14-cuda13.0-py3.11-debian12-runtime"  # Debian 12 is off the default platform: its alias names it


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def no_arm64_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning any arm64 combination fails, as a matrix without an arm64 base for it would."""
    planning_fails(monkeypatch, lambda combo: combo.platform is Platform.ARM64, "no arm64 base image recorded")


@pytest.mark.usefixtures("no_arm64_plan")
def test_an_index_whose_platform_could_not_be_planned_is_held_with_that_platforms_id(tmp_path: Path) -> None:
    fakes = fakes_for(TWO, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    first = pplan.indexes[0]
    assert (first.id, first.members, first.tags) == (AMD64_ID, (), None)
    assert first.problem == f"{ARM64_ID}: its group could not be planned"

    report, _ = run(fakes, tmp_path)
    py312 = ARM64_ID.replace("py3.11", "py3.12")
    assert [(i.tag, i.status, i.reason) for i in report.indexes] == [
        (AMD64_ID, AliasStatus.HELD, f"{ARM64_ID}: its group could not be planned"),
        (AMD64_ID.replace("py3.11", "py3.12"), AliasStatus.HELD, f"{py312}: its group could not be planned"),
    ]
    assert report.failed and fakes.registry.written == []


@pytest.mark.usefixtures("no_arm64_plan")
def test_a_platform_outside_this_run_that_cannot_be_planned_holds_the_index_with_its_error(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    pplan = plan_publish(fakes.m, [i for i in fakes.items if i.id == AMD64_ID], [], fakes.items)
    [index] = pplan.indexes
    assert (index.id, index.tags, index.problem) == (AMD64_ID, None, f"{ARM64_ID}: no arm64 base image recorded")


class IndexRecorder:
    """publish_index in place of the real one: what each call asked for, and a result of the test's choice."""

    def __init__(self, alias_result: IndexResult | None = None) -> None:
        self.calls: list[tuple[str, tuple[str, ...], object]] = []
        self.alias_result = alias_result

    def __call__(self, registry: Any, repo: str, tags: ImageTags, members: Any, content_hash: str, log: Any,
                 failed: Any = None, *, key: object = None) -> IndexResult:  # fmt: skip
        self.calls.append((tags.immutable, tags.aliases, key))
        if failed:
            return IndexResult(tags.immutable, AliasStatus.HELD, reason="held")
        if tags.immutable != TAG and self.alias_result is not None:
            return self.alias_result
        return IndexResult(tags.immutable, AliasStatus.MOVED)


def built(fakes: PublishFakes) -> dict[str, ItemResult]:
    return {i.id: ItemResult(i.id, Status.BUILT, f"{REPO}:{i.id}") for i in fakes.items}


def test_each_index_is_signed_with_the_publishs_key_and_its_alias_names_it_unsigned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = IndexRecorder()
    monkeypatch.setattr(publish_run, "publish_index", recorder)
    fakes = fakes_for(BOTH, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    key = object()
    settings = PublishSettings(repo=REPO, out_root=tmp_path, trust=TrustSettings(key=key))  # type: ignore[arg-type]
    [result] = publish_run._write_indexes(pplan, built(fakes), settings, fakes.registry, print)
    assert (result.tag, result.status) == (TAG, AliasStatus.MOVED)
    [alias] = publish_run._move_aliases(pplan, built(fakes), settings, fakes.factory(), fakes.registry, print, {TAG})
    assert (alias.alias, alias.status, alias.target) == (ALIAS, AliasStatus.MOVED, f"{REPO}:{TAG}")
    # the index under its immutable tag is signed; the alias is the same index (its signature is the digest's)
    assert recorder.calls == [(TAG, (), key), (ALIAS, (), None)]


def test_an_index_alias_the_registry_refused_is_held_with_the_registrys_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = IndexResult(ALIAS, AliasStatus.HELD, reason="registry refused the index: 403")
    monkeypatch.setattr(publish_run, "publish_index", IndexRecorder(refused))
    fakes = fakes_for(BOTH, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    settings = PublishSettings(repo=REPO, out_root=tmp_path)
    [alias] = publish_run._move_aliases(pplan, built(fakes), settings, fakes.factory(), fakes.registry, print, {TAG})
    assert (alias.alias, alias.status, alias.target, alias.reason) == (
        ALIAS,
        AliasStatus.HELD,
        f"{REPO}:{TAG}",
        "registry refused the index: 403",
    )


def test_an_alias_of_a_held_index_is_held_naming_the_index(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    arm64_only = PublishFakes(fakes.m, [i for i in fakes.items if i.combo.platform is Platform.ARM64])
    report, log = run(arm64_only, tmp_path, every=fakes.items)  # amd64 is not published: the index is held
    assert [(a.alias, a.status, a.target, a.reason) for a in report.aliases] == [
        (ALIAS, AliasStatus.HELD, f"{REPO}:{TAG}", f"its index {TAG} was held")
    ]
    assert f"HOLD  {REPO}:{ALIAS}: its index {REPO}:{TAG} was not written" in log


def test_an_alias_names_every_platform_that_failed(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    for group in set(fakes.groups.values()):
        fakes.fault(group, smoke_failures={"train.cpu": "loss did not fall"})
    report, log = run(fakes, tmp_path)
    [alias] = report.aliases
    assert (alias.status, alias.reason) == (
        AliasStatus.HELD,
        f"not every image behind it passed: {AMD64_ID}, {ARM64_ID}",
    )
    assert f"HOLD  {REPO}:{ALIAS}: {AMD64_ID}, {ARM64_ID} failed" in log


def test_the_aliases_after_an_index_alias_move_too(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH + NEWEST, tmp_path)
    report, _ = run(fakes, tmp_path)
    assert [(a.alias, a.status) for a in report.aliases] == [
        (ALIAS, AliasStatus.MOVED),  # the index's alias comes first in sorted order
        ("2.15-cuda13.2-runtime", AliasStatus.MOVED),
        ("latest-runtime", AliasStatus.MOVED),
    ]


def test_a_platform_that_failed_without_a_reason_still_holds_its_index(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    results = built(fakes) | {ARM64_ID: ItemResult(ARM64_ID, Status.FAILED)}
    settings = PublishSettings(repo=REPO, out_root=tmp_path)
    [index] = publish_run._write_indexes(pplan, results, settings, fakes.registry, print)
    assert (index.status, index.reason) == (AliasStatus.HELD, "linux/arm64 failed: failed")
    assert fakes.registry.written == []


def test_a_built_platform_with_a_reason_joins_its_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = IndexRecorder()
    monkeypatch.setattr(publish_run, "publish_index", recorder)
    fakes = fakes_for(BOTH, tmp_path)
    pplan = plan_publish(fakes.m, fakes.items, [])
    results = {i: replace(r, reason="pushed after one retry") for i, r in built(fakes).items()}
    settings = PublishSettings(repo=REPO, out_root=tmp_path)
    [index] = publish_run._write_indexes(pplan, results, settings, fakes.registry, print)
    assert index.status is AliasStatus.MOVED and recorder.calls == [(TAG, (), None)]


def test_a_platform_another_job_pushed_as_an_index_is_looked_up_for_its_own_platform(tmp_path: Path) -> None:
    # buildx pushes an index even for one platform (the image and its attestations): the arm64 member's
    # labels must be read for arm64, not for the default platform
    fakes = fakes_for(BOTH, tmp_path)
    run(fakes, tmp_path, aliases=False)
    fakes.registry.index_platforms[f"{REPO}:{TAG}-arm64"] = {"linux/arm64", "unknown/unknown"}
    amd64_only = PublishFakes(fakes.m, [i for i in fakes.items if i.id == AMD64_ID], registry=fakes.registry)
    report, _ = run(amd64_only, tmp_path / "again", every=fakes.items)
    assert [(i.tag, i.status) for i in report.indexes] == [(TAG, AliasStatus.MOVED)]
