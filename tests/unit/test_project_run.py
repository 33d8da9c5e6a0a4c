"""run and doctor in a project (docs/project.md, "Run and doctor in a project"): run starts the project's image,
found by the locator among the local images by what they hold (the project's name and the chosen combination's
labels, inherited from its base), newest first; a missing one is built with `torchyard build` where run may build
(--yes), else run names that command and exits 1; doctor says where the project's image is and whether it runs
here (wherever its base does)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, RunEngine, holding
from project_kit import NEW, OLD, cli, docker, on, project_folder

import builder.host.launch
from builder.core.process import Completed
from builder.engine import ImageInfo

PROJECT_LABEL = "io.torchyard.project"
OLD_TAG = "2.14.1-cuda12.6-cudnn9-py3.13-debian13-runtime"
MINE = f"torchyard/my-model:{OLD_TAG}-p0123456789ab"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """A project locked to OLD (init on the RTX 4090 with the 535 driver), run on that machine."""
    here = project_folder(tmp_path, monkeypatch)
    on(monkeypatch, "rtx4090-535")
    docker(monkeypatch, DOCKER_WITH_TOOLKIT)
    assert cli(capsys, "init")[0] == 0
    return here


def project_image(
    ref: str, combination: str, name: str = "my-model", created: str = "2026-12-01T10:00:00Z", **labels: str
) -> ImageInfo:
    """A project's image as `torchyard build` leaves it: the base's labels, and the project's."""
    info = holding(ref, combination, created=created)
    return replace(info, labels=info.labels | {PROJECT_LABEL: name, "io.torchyard.project-content": "0" * 64} | labels)


def engine_with(monkeypatch: pytest.MonkeyPatch, *images: ImageInfo) -> RunEngine:
    engine = docker(monkeypatch, DOCKER_WITH_TOOLKIT)
    for info in images:
        engine.images[info.tags[0]] = info
    return engine


def test_run_starts_the_newest_image_of_this_project_over_the_chosen_combination(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = f"torchyard/my-model:{OLD_TAG}-p00000000000a"
    engine = engine_with(
        monkeypatch,
        project_image(older, OLD, created="2026-11-01T10:00:00Z"),
        project_image(MINE, OLD),
        project_image("torchyard/other:x", OLD, name="other", created="2026-12-03T10:00:00Z"),  # another project
        project_image("torchyard/my-model:new", NEW, created="2026-12-03T10:00:00Z"),  # another combination
        project_image(
            "torchyard/my-model:devel", OLD, created="2026-12-03T10:00:00Z", **{"io.torchyard.flavor": "devel"}
        ),
    )
    code, out, err = cli(capsys, "run", "--dry-run")
    assert code == 0, err
    assert f"torchyard: the project's image: {MINE} ({OLD})" in err.splitlines()
    assert f" {MINE} sh -c " in out
    code, _, err = cli(capsys, "run", "--", "python", "-m", "my_model")
    assert code == 7, err  # the container's own exit code
    (spec,) = engine.started
    assert (spec.image, spec.command) == (MINE, ("python", "-m", "my_model"))
    assert engine.pulled == []


def test_without_its_image_a_dry_run_says_run_builds_it_and_a_script_gets_the_command(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engine_with(monkeypatch, holding(f"torchyard:{OLD_TAG}", OLD))  # the base alone is not the project
    code, out, err = cli(capsys, "run", "--dry-run")
    assert code == 0, err
    assert f"torchyard: the image of project my-model ({OLD}) is not built yet" in err.splitlines()
    assert "torchyard/my-model is not in the local engine: run builds it (torchyard build) in the project" in err
    assert " torchyard/my-model sh -c " in out
    code, out, err = cli(capsys, "run", "--", "python", "-c", "1")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        f"torchyard: error: the image of project my-model ({OLD}) is not in the local engine: build it with "
        "`torchyard build` in the project folder, or run again with --yes to build it now"
    )
    assert engine.started == [] and engine.pulled == []


def test_with_yes_run_builds_the_project_with_torchyard_build_then_starts_what_it_made(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engine_with(monkeypatch)
    built: list[Sequence[str]] = []

    def fake_build(argv: Sequence[str], **_: Any) -> Completed:
        built.append(argv)
        engine.images[MINE] = project_image(MINE, OLD)
        return Completed(tuple(argv), 0, ())

    monkeypatch.setattr(builder.host.launch, "run_command", fake_build)
    code, _, err = cli(capsys, "run", "--yes", "--", "python", "-m", "my_model")
    assert code == 7, err
    (argv,) = built
    assert argv[1:3] == ["-m", "builder"] and argv[-1] == "build"
    assert "torchyard: building: torchyard build" in err.splitlines()
    (spec,) = engine.started
    assert spec.image == MINE


def test_a_build_that_leaves_no_image_of_the_project_is_one_error(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engine_with(monkeypatch)
    monkeypatch.setattr(builder.host.launch, "run_command", lambda argv, **_: Completed(tuple(argv), 0, ()))
    code, _, err = cli(capsys, "run", "--yes")
    assert code == 1 and engine.started == []
    assert "torchyard/my-model: the build passed but no image of the project runs here" in err


def test_doctor_says_where_the_project_image_is_and_that_it_runs_where_its_base_does(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)
    code, out, err = cli(capsys, "doctor")
    assert code == 0, err
    assert f"project image: torchyard/my-model over {OLD}" in out
    assert "  where:    not built yet: `torchyard build` in the project builds it" in out
    assert "  runs here: yes: its base's combination is the one for this machine" in out
    assert "  run it:   torchyard run --yes (builds it first)" in out
    engine_with(monkeypatch, project_image(MINE, OLD))
    code, out, _ = cli(capsys, "doctor")
    assert f"  where:    in the local engine ({MINE})" in out and "  runs here: yes\n" in out
    assert "  run it:   torchyard run\n" in out
    code, out, _ = cli(capsys, "doctor", "--project", str(folder))
    assert "  run it:   torchyard run --project " in out
    code, out, _ = cli(capsys, "doctor", "--json")
    assert json.loads(out)["project"] == {
        "name": "my-model",
        "combination": OLD,
        "image": MINE,
        "where": "local engine",
        "runs_here": "yes",
        "build": "torchyard build",
    }
    code, out, _ = cli(capsys, "doctor", "--json", "--no-project")
    assert "project" not in json.loads(out)


def test_doctor_on_a_machine_the_locked_combination_cannot_run_on_says_the_project_does_not_run(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch, project_image(MINE, OLD))
    on(monkeypatch, "gb10-580-arm64")
    code, out, _ = cli(capsys, "doctor")
    assert code == 0
    assert "project image: no: no image of its combination runs on this machine (see the problems below)" in out


def test_a_project_built_for_other_gpus_is_not_vouched_for_here(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (folder / "torchyard.toml").read_text()
    (folder / "torchyard.toml").write_text(text.replace("\n[torch]\n", '\n[torch]\narchs = ["sm_90"]\n', 1))
    (folder / "torchyard.lock").unlink()  # torch.id decides
    engine_with(monkeypatch)
    code, out, err = cli(capsys, "doctor")
    assert code == 0, err
    assert "  runs here: not checked: built for sm_90 (torch.archs), this machine has sm_89" in out
