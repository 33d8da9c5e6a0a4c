"""[[publish]] platforms (issue 15): a multi-platform entry publishes each platform's image as <tag>-<arch> and
one index under the platform-free tags once every platform passed; a failing platform holds the index and its
aliases; an entry naming a platform its variant has no wheels for is refused with file:line. Fakes at the seam."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_engine import wall_off_the_engine
from publish_kit import BOTH, REPO, TWO, PublishFakes, fakes_for, matrix_with
from publish_kit import run_publish as run

from builder.core.errors import MatrixError
from builder.core.kinds import AliasStatus, Platform, Status
from builder.pipeline.multiplatform import IndexResult, combined_hash
from builder.pipeline.plan import make_plan
from builder.publish.export import ARM_GPU_RUNNER, GPU_RUNNER, bake, github_matrix
from builder.publish.items import expand
from builder.publish.plan import plan_publish
from builder.publish.report import NO_PUSH_INDEX, ItemResult, Report

AMD64, ARM64 = "both/torch2.14.1-cu130-py3.11-debian12", "both/torch2.14.1-cu130-py3.11-debian12-arm64"
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
ALIAS = "2.14-cuda13.0-py3.11-debian12-runtime"  # Debian 12 is off the default platform: its alias names it


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


# --- the set -------------------------------------------------------------------------------------------


def test_a_multi_platform_entry_expands_to_one_item_per_platform_and_one_index(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    assert [i.id for i in fakes.items] == [
        "torch2.14.1-cu130-py3.11-debian12-runtime",
        "torch2.14.1-cu130-py3.11-debian12-arm64-runtime",
    ]
    pplan = plan_publish(fakes.m, fakes.items, [])
    [index] = pplan.indexes
    assert (index.id, index.tags and index.tags.all()) == ("torch2.14.1-cu130-py3.11-debian12-runtime", (TAG, ALIAS))
    plans = {i.combo.platform: make_plan(fakes.m, i.combo, i.options) for i in fakes.items}
    assert index.content_hash == combined_hash({p: plan.content_hash for p, plan in plans.items()})
    assert [g.immutable(i) for g in pplan.groups for i in g.items] == [f"{TAG}-amd64", f"{TAG}-arm64"]
    [move] = pplan.aliases
    assert (move.alias, move.index) == (ALIAS, index)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            'torch = ">=2.10,<2.12"',
            "torch 2.10.0's PyPI default is cu128 on linux/amd64, cpu on linux/arm64: one image index holds one "
            "variant (name it in variants, or narrow torch)",
        ),
        (
            'torch = "==2.14.1"\nvariants = ["cu126"]',
            "torch 2.14.1 has no linux/arm64 cu126 wheels (its linux/arm64 variants: cu130)",
        ),
        (
            'torch = "==2.5.1"\nvariants = ["cpu"]\npython = ["3.13"]',
            "torch 2.5.1 has no Python 3.13 wheels for linux/arm64",
        ),
    ],
)
def test_an_entry_asking_for_wheels_a_platform_lacks_is_refused_with_its_line(
    tmp_path: Path, entry: str, message: str
) -> None:
    publish_set = f'[[publish]]\nname = "x"\n{entry}\nos = ["debian12"]\nplatforms = ["linux/amd64", "linux/arm64"]\n'
    with pytest.raises(MatrixError) as raised:
        matrix_with(publish_set, tmp_path)
    text = (tmp_path / "matrix.toml").read_text()
    line = text.count("\n", 0, text.index('platforms = ["linux/amd64"')) + 1
    assert str(raised.value) == f"{tmp_path / 'matrix.toml'}:{line}: publish[x].platforms: {message}"
    assert raised.value.exit_code == 2


def test_an_unknown_platform_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MatrixError) as raised:
        matrix_with(
            '[[publish]]\nname = "x"\ntorch = "==2.14.1"\nos = ["debian12"]\nplatforms = ["riscv64"]\n', tmp_path
        )
    assert "publish[x].platforms: platform: 'riscv64' is not a platform torchyard builds for" in str(raised.value)


def test_an_arm64_only_entry_takes_arm64s_pypi_default_and_its_own_tags(tmp_path: Path) -> None:
    m = matrix_with('[[publish]]\nname = "g"\ntorch = "==2.5.1"\nos = ["debian12"]\nflavors = ["runtime"]\n'
                    'platforms = ["linux/arm64"]\n', tmp_path)  # fmt: skip
    items, _ = expand(m)
    assert [i.id for i in items] == ["torch2.5.1-cpu-py3.11-debian12-arm64-runtime"]  # PyPI's aarch64 default
    pplan = plan_publish(m, items, [])
    assert pplan.indexes == ()
    assert [a.alias for a in pplan.aliases] == ["2.5-cpu-py3.11-debian12-runtime-arm64"]


# --- the run -------------------------------------------------------------------------------------------


def test_every_platform_passes_then_the_index_and_its_alias_are_written(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    report, _ = run(fakes, tmp_path)
    assert sorted(fakes.pushed()) == [f"{REPO}:{TAG}-amd64", f"{REPO}:{TAG}-arm64"]
    assert fakes.registry.written == [f"{REPO}:{TAG}", f"{REPO}:{ALIAS}"]
    members, _ = fakes.registry.indexes[f"{REPO}:{TAG}"]
    assert set(members) == {"linux/amd64", "linux/arm64"}
    assert [(i.tag, i.status) for i in report.indexes] == [(TAG, AliasStatus.MOVED)]
    assert [(a.alias, a.status, a.target) for a in report.aliases] == [(ALIAS, AliasStatus.MOVED, f"{REPO}:{TAG}")]
    assert not report.failed
    assert report.as_json()["indexes"][0]["members"] == members


def test_a_failing_platform_holds_the_index_and_its_alias_and_says_why(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    fakes.fault(ARM64, smoke_fail_platform="linux/arm64")
    report, _ = run(fakes, tmp_path)
    assert fakes.pushed() == [f"{REPO}:{TAG}-amd64"]
    assert fakes.registry.written == []
    [index] = report.indexes
    assert index.status is AliasStatus.HELD
    assert index.reason.startswith("linux/arm64 failed: [runtime] smoke suite failed, nothing tagged: train.cpu")
    [alias] = report.aliases
    assert alias.status is AliasStatus.HELD
    assert alias.reason == "not every image behind it passed: torch2.14.1-cu130-py3.11-debian12-arm64-runtime"
    assert report.failed
    assert {i.id: i.status for i in report.items} == {
        "torch2.14.1-cu130-py3.11-debian12-runtime": Status.BUILT,
        "torch2.14.1-cu130-py3.11-debian12-arm64-runtime": Status.FAILED,
    }


def test_a_rerun_skips_the_unchanged_index_without_pulling_or_writing(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    run(fakes, tmp_path)
    fakes.registry.written.clear()
    again = PublishFakes(fakes.m, fakes.items, registry=fakes.registry)
    report, _ = run(again, tmp_path)
    assert [op for op, _ in again.ops() if op in ("build", "pull", "push")] == []
    assert fakes.registry.written == []
    assert [i.status for i in report.indexes] == [AliasStatus.UNCHANGED]
    assert [a.status for a in report.aliases] == [AliasStatus.UNCHANGED]


def test_one_platform_published_alone_joins_the_index_when_the_other_is_already_there(tmp_path: Path) -> None:
    # CI fan-out or a native arm64 runner: --only selects one platform; the other is read from the registry.
    fakes = fakes_for(BOTH, tmp_path)
    run(fakes, tmp_path, aliases=False)  # both members pushed, no index (--no-aliases)
    assert fakes.registry.written == []
    arm64_only = PublishFakes(fakes.m, [i for i in fakes.items if i.combo.platform is Platform.ARM64],
                              registry=fakes.registry)  # fmt: skip
    report, _ = run(arm64_only, tmp_path, every=fakes.items)
    assert [i.status for i in report.indexes] == [AliasStatus.MOVED]
    assert fakes.registry.written == [f"{REPO}:{TAG}", f"{REPO}:{ALIAS}"]
    members, _ = fakes.registry.indexes[f"{REPO}:{TAG}"]
    assert members == {p: fakes.registry.images[f"{REPO}:{TAG}-{p[6:]}"][1] for p in ("linux/amd64", "linux/arm64")}


def test_one_platform_alone_holds_the_index_when_the_other_is_not_published(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    arm64_only = PublishFakes(fakes.m, [i for i in fakes.items if i.combo.platform is Platform.ARM64])
    report, _ = run(arm64_only, tmp_path, every=fakes.items)
    [index] = report.indexes
    assert index.status is AliasStatus.HELD and arm64_only.registry.written == []
    assert index.reason == (
        f"linux/amd64 failed: {REPO}:{TAG}-amd64 is not published with its current content (this run did not build it)"
    )


# --- the exports ----------------------------------------------------------------------------------------


def test_the_github_matrix_builds_arm64_natively_on_arm_runners(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    matrix = github_matrix(plan_publish(fakes.m, fakes.items, []), REPO, f"{REPO}-candidates", None)
    amd64, arm64 = matrix["include"]
    assert (amd64["runs-on"], arm64["runs-on"]) == ("ubuntu-latest", "ubuntu-24.04-arm")
    assert "--platform linux/arm64" in arm64["build"] and "--platform linux/amd64" in amd64["build"]
    assert arm64["push"].startswith(f"torchyard promote {REPO}-candidates:{TAG}-arm64 {REPO}:{TAG}-arm64 ")
    assert amd64["push"].startswith(f"torchyard promote {REPO}-candidates:{TAG} {REPO}:{TAG}-amd64 ")
    assert arm64["image"] == f"{REPO}:{TAG}-arm64"


def test_an_arm64_cuda_image_is_smoked_on_an_arm64_gpu_runner(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    amd64, arm64 = github_matrix(plan_publish(fakes.m, fakes.items, []), REPO, f"{REPO}-candidates", "all")["include"]
    assert (amd64["gpu"], arm64["gpu"]) == (True, True)
    assert (amd64["smoke-runs-on"], arm64["smoke-runs-on"]) == (GPU_RUNNER, ARM_GPU_RUNNER)
    assert ARM_GPU_RUNNER == ["self-hosted", "gpu", "arm64"] and GPU_RUNNER == ["self-hosted", "gpu"]


def test_bake_carries_each_targets_platform(tmp_path: Path) -> None:
    fakes = fakes_for(BOTH, tmp_path)
    data = bake(plan_publish(fakes.m, fakes.items, []), REPO, tmp_path / "bake", None)
    images = {name: t for name, t in data["target"].items() if "inherits" in t}
    assert {tuple(t["platforms"]) for t in images.values()} == {("linux/amd64",), ("linux/arm64",)}
    assert sorted(tag for t in images.values() for tag in t["tags"]) == [f"{REPO}:{TAG}-amd64", f"{REPO}:{TAG}-arm64"]


def test_without_push_every_index_is_held_with_why_and_each_platform_is_tagged_here(tmp_path: Path) -> None:
    fakes = fakes_for(TWO, tmp_path)
    report, log = run(fakes, tmp_path, push=False)
    tags = [TAG, TAG.replace("py3.11", "py3.12")]
    assert [(i.tag, i.status, i.reason) for i in report.indexes] == [
        (tag, AliasStatus.HELD, "--no-push: an index lives in a registry") for tag in tags
    ]
    assert [line for line in log if line.startswith("LOCAL ")] == [
        f"LOCAL {tag}: no --push, no index (each platform is tagged <tag>-<arch> here)" for tag in tags
    ]
    assert fakes.pushed() == [] and fakes.registry.written == []
    # every image built and passed: a run that was asked not to push did what it was asked (exit 0, not 4)
    assert all(i.status is Status.BUILT for i in report.items) and not report.failed


def test_an_index_held_for_any_other_reason_fails_the_run_though_every_image_passed() -> None:
    built = [ItemResult("a", Status.BUILT)]
    refused = IndexResult(TAG, AliasStatus.HELD, reason="registry refused the index: 403")
    assert Report(built, [], 0.0, indexes=[refused]).failed
    assert not Report(built, [], 0.0, indexes=[IndexResult(TAG, AliasStatus.HELD, reason=NO_PUSH_INDEX)]).failed
    assert not Report(built, [], 0.0, indexes=[IndexResult(TAG, AliasStatus.MOVED)]).failed
