"""Multi-platform images (issue 15.2): each platform built, smoke-tested and pushed as <immutable>-<arch>; one
OCI image index under the platform-free tags only when every platform passed; a failing platform holds the
tag and says why; an unchanged index is recognised without pulling or writing. Fake engine, fake registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from render_kit import plan

from builder.core.kinds import AliasStatus, Flavor, Platform
from builder.pipeline.multiplatform import PlatformsRun, build_platforms, combined_hash, index_tags, publish_index
from builder.pipeline.pipeline import BuildSettings
from builder.pipeline.plan import Plan
from builder.render.tags import ImageTags, index_tag, member_tag

REPO = "127.0.0.1:5000/team/torch"
AMD64_ID, ARM64_ID = "torch2.14.1-cu130-py3.11-debian12", "torch2.14.1-cu130-py3.11-debian12-arm64"
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
ALIAS = "2.14-cuda13.0-py3.11-debian12-runtime"  # Debian 12 is off the default platform: the alias names it
A, B = Platform.AMD64, Platform.ARM64


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


@pytest.fixture
def plans() -> tuple[Plan, Plan]:
    return plan(AMD64_ID), plan(ARM64_ID)


def fake(plans: tuple[Plan, ...], **knobs: object) -> FakeEngine:
    engine = FakeEngine(contents_of(plans[0]), registry=FakeRegistry())
    engine.by_platform = {p.combination.platform.value: contents_of(p) for p in plans}
    for name, value in knobs.items():
        assert hasattr(engine, name), name
        setattr(engine, name, value)
    return engine


def run(
    engine: FakeEngine, plans: tuple[Plan, ...], tmp_path: Path, push: bool = True
) -> tuple[PlatformsRun, list[str]]:
    log: list[str] = []
    settings = BuildSettings(repo=REPO, flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "out", push=push)
    assert engine.registry is not None
    return build_platforms(engine, plans, settings, log.append, engine.registry), log


# --- tags and content --------------------------------------------------------------------------------------


def test_member_and_index_tags() -> None:
    assert member_tag(TAG, A) == f"{TAG}-amd64"
    assert member_tag(f"{TAG}-arm64", B) == f"{TAG}-arm64"
    assert index_tag(f"{TAG}-arm64", B) == TAG and index_tag(TAG, A) == TAG


def test_the_index_takes_the_aliases_every_platform_carries() -> None:
    tags = index_tags({A: ImageTags(TAG, (ALIAS, "latest-runtime")), B: ImageTags(f"{TAG}-arm64", (f"{ALIAS}-arm64",))})
    assert tags == ImageTags(TAG, (ALIAS,))  # latest is amd64's alone here: not the set's


def test_the_index_content_combines_each_platforms_hash_in_platform_order() -> None:
    one = combined_hash({A: "a" * 64, B: "b" * 64})
    assert one == combined_hash({B: "b" * 64, A: "a" * 64})
    assert one != combined_hash({A: "a" * 64, B: "c" * 64}) != combined_hash({A: "a" * 64})


# --- build --platform linux/amd64,linux/arm64 --push --------------------------------------------------------


def test_every_platform_passes_then_one_index_under_the_tag_and_its_alias(
    plans: tuple[Plan, Plan], tmp_path: Path
) -> None:
    engine = fake(plans)
    result, log = run(engine, plans, tmp_path)
    registry = engine.registry
    assert registry is not None
    assert engine.pushed() == [f"{REPO}:{TAG}-amd64", f"{REPO}:{TAG}-arm64"]  # member tags only, no alias
    assert registry.written == [f"{REPO}:{TAG}", f"{REPO}:{ALIAS}"]  # the index, then its alias
    members, content = registry.indexes[f"{REPO}:{TAG}"]
    assert members == {
        "linux/amd64": registry.images[f"{REPO}:{TAG}-amd64"][1],
        "linux/arm64": registry.images[f"{REPO}:{TAG}-arm64"][1],
    }
    assert content == combined_hash({A: plans[0].content_hash, B: plans[1].content_hash})
    assert registry.indexes[f"{REPO}:{ALIAS}"] == registry.indexes[f"{REPO}:{TAG}"]
    assert [i.status for i in result.indexes] == [AliasStatus.MOVED]
    assert result.ok
    assert (tmp_path / "out" / "amd64" / "Dockerfile").is_file() and (tmp_path / "out" / "arm64").is_dir()
    assert any(line.startswith("[arm64] [runtime] linux/arm64 runs emulated") for line in log)


def test_a_platform_that_fails_holds_the_index_and_says_why(plans: tuple[Plan, Plan], tmp_path: Path) -> None:
    engine = fake(plans, smoke_fail_platform="linux/arm64")
    result, log = run(engine, plans, tmp_path)
    registry = engine.registry
    assert registry is not None
    assert engine.pushed() == [f"{REPO}:{TAG}-amd64"]  # the platform that passed stays addressable
    assert registry.written == [] and registry.indexes == {}
    [index] = result.indexes
    assert index.status is AliasStatus.HELD
    assert index.reason.startswith("linux/arm64 failed: [runtime] smoke suite failed, nothing tagged: train.cpu")
    assert not result.ok
    assert f"HOLD  {REPO}:{TAG}: linux/arm64 failed: [runtime] smoke suite failed" in "\n".join(log)
    assert not any(ref.endswith("-arm64") for ref in engine.tags)  # nothing unverified was tagged


def test_a_rerun_finds_the_index_unchanged_without_pulling_building_or_writing(
    plans: tuple[Plan, Plan], tmp_path: Path
) -> None:
    engine = fake(plans)
    run(engine, plans, tmp_path)
    registry = engine.registry
    assert registry is not None
    again = FakeEngine(engine.contents, registry=registry, by_platform=engine.by_platform)
    result, log = run(again, plans, tmp_path / "again")
    assert again.of("build") == [] and again.of("pull") == [] and again.pushed() == []
    assert registry.written == [f"{REPO}:{TAG}", f"{REPO}:{ALIAS}"]  # nothing written the second time
    assert [i.status for i in result.indexes] == [AliasStatus.UNCHANGED]
    assert f"SKIP  {REPO}:{TAG}: the index and its aliases already name this content" in log


def test_an_alias_behind_is_moved_and_the_index_left_alone(plans: tuple[Plan, Plan], tmp_path: Path) -> None:
    engine = fake(plans)
    run(engine, plans, tmp_path)
    registry = engine.registry
    assert registry is not None
    registry.indexes[f"{REPO}:{ALIAS}"] = ({"linux/amd64": "sha256:" + "0" * 64}, "an older content hash")
    registry.written.clear()
    run(FakeEngine(engine.contents, registry=registry, by_platform=engine.by_platform), plans, tmp_path)
    assert registry.written == [f"{REPO}:{ALIAS}"]
    assert registry.indexes[f"{REPO}:{ALIAS}"] == registry.indexes[f"{REPO}:{TAG}"]


def test_without_push_each_platform_is_tagged_locally_and_no_index_is_claimed(
    plans: tuple[Plan, Plan], tmp_path: Path
) -> None:
    engine = fake(plans)
    result, log = run(engine, plans, tmp_path, push=False)
    assert set(engine.tags) == {f"{REPO}:{TAG}-amd64", f"{REPO}:{TAG}-arm64"}
    assert result.indexes == [] and engine.pushed() == []
    assert log[-1].startswith("no --push: each platform's image is tagged <tag>-<arch> here")


def test_an_index_whose_member_is_missing_is_held(tmp_path: Path) -> None:
    registry = FakeRegistry()
    registry.images[f"{REPO}:{TAG}-amd64"] = ("linux/amd64", "sha256:" + "1" * 64)
    registry.images[f"{REPO}:{TAG}-arm64"] = ("linux/amd64", "sha256:" + "2" * 64)  # the wrong platform
    log: list[str] = []
    members = {A: f"{TAG}-amd64", B: f"{TAG}-arm64"}
    result = publish_index(registry, REPO, ImageTags(TAG, ()), members, "h", log.append)
    assert result.status is AliasStatus.HELD
    assert result.reason == f"{REPO}:{TAG}-arm64 holds no linux/arm64 image: push it before its index"
    assert registry.written == []
