"""The project image and the registry (docs/project.md, "The project image"): with --push the registry is asked
first, and a tag that holds the project's content id is neither built nor pushed again; build-report.json and
plan.json describe the project image beside the base (its ref, content id, digest, its checks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeEngine, wall_off_the_engine
from test_project_image import REPO, both, cli_build, engine_for, folder, planned, settings

from builder.core.errors import PushError
from builder.core.kinds import Status
from builder.engine import RunResult
from builder.pipeline.pipeline import build
from builder.pipeline.project_build import PASSED_BEFORE, PROJECT_DIR, build_project, project_report
from builder.pipeline.project_plan import PROJECT_CONTENT_LABEL, ProjectPlan, project_json

__all__ = ["folder"]  # the fixture, shared with test_project_image.py


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def project_run(engine: FakeEngine, p: ProjectPlan, tmp_path: Path, log: list[str]) -> Status:
    """The base (up to date or built), then the project, both with --push against the fake registry."""
    assert engine.registry is not None
    s = settings(tmp_path, push=True)
    build(engine, p.base, s, log.append, engine.registry)
    return build_project(engine, p, s, log.append, engine.registry).status


def test_a_first_push_pushes_the_project_image_and_keeps_its_digest(folder: Path, tmp_path: Path) -> None:
    p, log = planned(folder), list[str]()
    engine = engine_for(p)
    s = settings(tmp_path, push=True)
    assert engine.registry is not None
    build(engine, p.base, s, log.append, engine.registry)
    outcome = build_project(engine, p, s, log.append, engine.registry)
    assert outcome.pushed == [p.ref(REPO)] and engine.pushed()[-1] == p.ref(REPO)
    assert outcome.digest.startswith("sha256:") and log[-1] == f"[project] pushed {p.ref(REPO)} ({outcome.digest})"
    assert engine.registry.push_checks[-1] == f"{REPO}/my-model"


def test_a_second_push_of_the_same_content_is_skipped_and_said(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    project_run(engine, p, tmp_path, [])
    digest = engine.registry.images[p.ref(REPO)][1] if engine.registry else ""
    engine.calls.clear()
    log: list[str] = []
    assert project_run(engine, p, tmp_path, log) is Status.UP_TO_DATE
    assert engine.pushed() == [] and engine.of("build") == []
    assert log[-2:] == [
        f"[project] {p.ref(REPO)} is up to date locally: no build",
        f"[project] {p.ref(REPO)} is in the registry with this content already ({digest}): not pushed",
    ]


def test_a_machine_without_the_image_neither_builds_nor_pushes_what_the_registry_holds(
    folder: Path, tmp_path: Path
) -> None:
    p = planned(folder)
    engine = engine_for(p)
    project_run(engine, p, tmp_path, [])
    del engine.tags[p.ref(REPO)]  # another machine: the registry holds it, the local engine does not
    engine.calls.clear()
    log: list[str] = []
    s = settings(tmp_path, push=True)
    assert engine.registry is not None
    outcome = build_project(engine, p, s, log.append, engine.registry)
    assert (outcome.status, outcome.pushed, outcome.image_id) == (Status.UP_TO_DATE, [], "")
    assert engine.of("build") == [] and engine.pushed() == [] and engine.of("run") == []
    assert log == [f"[project] {p.ref(REPO)} is up to date in the registry ({outcome.digest}): no build, no push"]
    assert outcome.checks == [
        ("import my_model", PASSED_BEFORE),
        ("python -m my_model.serve --help", PASSED_BEFORE),
    ]


def test_another_content_under_the_tag_is_pushed_over(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    assert engine.registry is not None
    engine.registry.refs[p.ref(REPO)] = {PROJECT_CONTENT_LABEL: "0" * 64}  # a stale or foreign image
    log: list[str] = []
    assert project_run(engine, p, tmp_path, log) is Status.BUILT
    assert engine.pushed()[-1] == p.ref(REPO) and log[-1].startswith(f"[project] pushed {p.ref(REPO)} (sha256:")


def test_the_base_content_label_the_project_inherits_does_not_count(folder: Path, tmp_path: Path) -> None:
    """The project image carries its base's content label: only the project's own content id says it is there."""
    p = planned(folder)
    engine = engine_for(p)
    assert engine.registry is not None
    engine.registry.refs[p.ref(REPO)] = dict(p.base.build_labels())
    assert project_run(engine, p, tmp_path, []) is Status.BUILT
    assert engine.pushed()[-1] == p.ref(REPO)


def test_a_registry_that_refuses_the_push_stops_before_the_project_build(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    assert engine.registry is not None
    s = settings(tmp_path, push=True)
    build(engine, p.base, s, lambda line: None, engine.registry)
    engine.registry.push_refusal = PushError(f"{REPO}/my-model: the registry refuses pushes (401)")
    engine.calls.clear()
    with pytest.raises(PushError, match="refuses pushes"):
        build_project(engine, p, s, lambda line: None, engine.registry)
    assert engine.of("build") == []


def test_without_push_the_registry_is_not_asked(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    both(engine, p, settings(tmp_path), [])
    assert engine.registry is not None and engine.registry.reads == [] and engine.pushed() == []


# --- plan.json and build-report.json -----------------------------------------------------------------------


def test_the_report_has_the_ref_content_id_digest_and_the_checks(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    engine = engine_for(p)
    s = settings(tmp_path, push=True)
    assert engine.registry is not None
    build(engine, p.base, s, lambda line: None, engine.registry)
    outcome = build_project(engine, p, s, lambda line: None, engine.registry)
    assert project_report(p, REPO, outcome) | {"seconds": 0} == {
        "ref": p.ref(REPO),
        "status": "built",
        "content_id": p.content_id,
        "seconds": 0,
        "digest": outcome.digest,
        "pushed": [p.ref(REPO)],
        "checks": [
            {"check": "import my_model", "result": "passed"},
            {"check": "python -m my_model.serve --help", "result": "passed"},
        ],
    }
    again = build_project(engine, p, s, lambda line: None, engine.registry)
    report = project_report(p, REPO, again)
    assert (report["status"], report["digest"], report["pushed"]) == ("up-to-date", outcome.digest, [])
    assert report["checks"][0] == {
        "check": "import my_model",
        "result": "passed",
        "detail": "passed when the image was built; it is up to date",
    }


def test_without_push_the_digest_is_null_and_an_unknown_package_is_not_checked(folder: Path, tmp_path: Path) -> None:
    (folder / "torchyard.toml").write_text('[project]\nname = "my-model"\n')
    p = planned(folder)
    engine = engine_for(p)
    both(engine, p, settings(tmp_path), [])
    outcome = build_project(engine, p, settings(tmp_path), lambda line: None, engine.registry)
    report = project_report(p, REPO, outcome)
    assert (report["digest"], report["pushed"], report["status"]) == (None, [], "up-to-date")
    first = project_report(p, REPO, build_project(engine_for(p), p, settings(tmp_path / "2"), lambda line: None))
    assert first["checks"] == [
        {
            "check": "import",
            "result": "not checked",
            "detail": 'no image.command = ["python", "-m", PACKAGE] and no pyproject.toml with a [project] name',
        }
    ]


def test_plan_json_describes_the_project_image_beside_the_base(folder: Path, tmp_path: Path) -> None:
    p = planned(folder)
    assert project_json(None, REPO, tmp_path) == {}
    assert project_json(p, REPO, tmp_path / PROJECT_DIR)["project"] == {
        "name": "my-model",
        "ref": p.ref(REPO),
        "base_ref": p.base_ref(REPO),
        "flavor": "runtime",
        "content_id": p.content_id,
        "dockerfile": str(tmp_path / PROJECT_DIR / "Dockerfile"),
        "labels": p.labels(),
        "checks": [
            {"check": "import my_model", "command": ["python", "-c", "import my_model"]},
            {"check": "python -m my_model.serve --help", "command": ["python", "-m", "my_model.serve", "--help"]},
        ],
    }


def test_torchyard_build_writes_the_project_into_plan_json_and_build_report_json(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, engine = cli_build(folder, monkeypatch, capsys)
    assert code == 0, err
    plan = json.loads((folder / "out" / "plan.json").read_text())
    report = json.loads((folder / "out" / "build-report.json").read_text())
    ref = plan["project"]["ref"]
    assert ref in engine.tags and "runtime" in plan["targets"] and "runtime" in report["targets"]
    assert report["project"]["ref"] == ref and report["project"]["status"] == "built"
    assert report["project"]["content_id"] == plan["project"]["content_id"]
    assert ref.endswith("-p" + plan["project"]["content_id"][:12])
    assert [c["result"] for c in report["project"]["checks"]] == ["passed", "passed"]


def test_a_failed_project_is_in_the_report_with_why(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = {"python": RunResult(1, "ModuleNotFoundError: No module named 'my_model'\n")}
    code, _, err, _ = cli_build(folder, monkeypatch, capsys, scripted=failed)
    assert code == 4, err
    report = json.loads((folder / "out" / "build-report.json").read_text())
    assert report["targets"]["runtime"]["status"] in ("built", "up-to-date")
    assert report["project"]["status"] == "failed"
    assert report["project"]["error"].startswith("[project] check `import my_model` failed (exit 1)")


def test_a_dry_run_with_push_says_the_registry_is_asked_first(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from project_kit import cli
    from test_project_image import IDENT

    monkeypatch.chdir(folder)
    (folder / "torchyard.toml").write_text(f'[torch]\nid = "{IDENT}"\n\n' + (folder / "torchyard.toml").read_text())
    code, out, err = cli(capsys, "build", "--dry-run", "--no-host-settings", "--push", "--repo", REPO)
    assert code == 0, err
    tag, push = out.splitlines()[-2:]
    assert tag.startswith(f"    {REPO}/my-model:") and "-p" in tag
    assert push == "  then push, skipped where the registry holds this content id already"
