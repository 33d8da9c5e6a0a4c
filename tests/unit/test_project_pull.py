"""run in a project with a team repository (docs/project.md, "Run and doctor in a project"): a project image that
is not local is looked for in the registry, under REPO/NAME where `build --push` put it, by what it holds (the
project's name, the chosen combination, the flavor, the platform), the newest built first; it is pulled, and run
offers to build only when the registry holds none, cannot be reached, or the pull fails."""

from __future__ import annotations

import json
from typing import Any

import pytest
from host_kit import RTX4090_535, holding, machine
from matrix_kit import real
from project_kit import OLD, cli
from test_project_run import OLD_TAG, engine_with, folder, project_image

import builder.host.locate
import builder.host.project_remote
from builder.core.errors import PushError, TorchyardError
from builder.engine import ImageInfo
from builder.host.doctor import judge_here
from builder.host.locate import ProjectWanted, Where
from builder.host.probe import probe
from builder.host.project_remote import project_in_registry
from builder.oci.refs import RepoRef

__all__ = ["folder"]  # the fixture, shared with test_project_run.py

TEAM = "127.0.0.1:5000/team"
MINE = f"{TEAM}/my-model:{OLD_TAG}-p0123456789ab"
OLDER = f"{TEAM}/my-model:{OLD_TAG}-p00000000000a"


def config(info: ImageInfo, created: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    return {"architecture": "amd64", "os": "linux", "created": created, "config": {"Labels": info.labels, "Env": []}}


class Client:
    """The registry as the locators ask it: each repository's tags, each tag's config (or one error for all)."""

    def __init__(self, configs: dict[str, dict[str, Any]], error: TorchyardError | None = None) -> None:
        self.configs, self.error = configs, error
        self.asked: list[str] = []

    def tags(self, repo: RepoRef) -> list[str]:
        self.asked.append(f"tags {repo}")
        if self.error is not None:
            raise self.error
        return [ref.rpartition(":")[2] for ref in self.configs if ref.rpartition(":")[0] == str(repo)]

    def image(self, repo: RepoRef, tag: str, platform: str) -> tuple[object, dict[str, Any]] | None:
        self.asked.append(tag)
        return None if f"{repo}:{tag}" not in self.configs else (object(), self.configs[f"{repo}:{tag}"])


def registry(monkeypatch: pytest.MonkeyPatch, client: Client) -> Client:
    """The client both locators make (the base's and the project's): no request leaves the test."""
    monkeypatch.setattr(builder.host.locate, "Distribution", lambda http: client)
    monkeypatch.setattr(builder.host.project_remote, "Distribution", lambda http: client)
    return client


def test_run_pulls_the_project_image_from_the_team_repository(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pushed = project_image(MINE, OLD)
    engine = engine_with(monkeypatch)
    engine.registry[MINE] = pushed
    registry(monkeypatch, Client({MINE: config(pushed)}))
    code, out, err = cli(capsys, "run", "--repo", TEAM, "--dry-run")
    assert code == 0, err
    assert f"torchyard: the project's image: {MINE} ({OLD}), in the team's repository" in err.splitlines()
    assert f"torchyard: {MINE} is not in the local engine: run pulls it from the team's repository (if that " \
        "fails, builds it (torchyard build) in the project)" in err.splitlines()  # fmt: skip
    assert f" {MINE} sh -c " in out and engine.pulled == []
    code, _, err = cli(capsys, "run", "--repo", TEAM, "--", "python", "-m", "my_model")
    assert code == 7, err
    assert engine.pulled == [MINE] and f"torchyard: {MINE} is not in the local engine: pulling it" in err
    (spec,) = engine.started
    assert (spec.image, spec.command) == (MINE, ("python", "-m", "my_model"))


def test_a_local_image_of_the_project_is_taken_before_the_registry_is_asked(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = f"torchyard/my-model:{OLD_TAG}-p0123456789ab"
    engine = engine_with(monkeypatch, project_image(local, OLD))
    client = registry(monkeypatch, Client({MINE: config(project_image(MINE, OLD))}))
    code, _, err = cli(capsys, "run", "--repo", TEAM, "--", "true")
    assert code == 7, err
    assert engine.started[0].image == local and engine.pulled == []
    assert not [a for a in client.asked if a.startswith("tags ") and a.endswith("/my-model")]


def test_without_a_fitting_image_in_the_registry_run_says_so_and_offers_the_build(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engine_with(monkeypatch)
    other = project_image(f"{TEAM}/my-model:x-p0000000000aa", "torch2.15.0-cu132-py3.13-debian13")
    devel = project_image(f"{TEAM}/my-model:y-p0000000000bb", OLD, **{"io.torchyard.flavor": "devel"})
    alien = project_image(f"{TEAM}/my-model:z-p0000000000cc", OLD, name="their-model")
    registry(monkeypatch, Client({i.tags[0]: config(i) for i in (other, devel, alien)}))
    code, out, err = cli(capsys, "run", "--repo", TEAM, "--", "true")
    assert (code, out) == (1, "")
    assert f"torchyard: no image of project my-model over {OLD} that runs here is in {TEAM}/my-model" in err
    assert "is not in the local engine: build it with `torchyard build` in the project folder" in err
    assert engine.pulled == [] and engine.started == []


def test_an_unreachable_registry_is_a_note_and_run_offers_the_build(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)
    registry(monkeypatch, Client({}, PushError("registry 127.0.0.1:5000 is unreachable: refused")))
    code, _, err = cli(capsys, "run", "--repo", TEAM, "--", "true")
    assert code == 1
    assert f"torchyard: the registry of {TEAM}/my-model is not reachable (registry 127.0.0.1:5000 is " \
        "unreachable: refused)" in err.splitlines()  # fmt: skip


def test_a_failed_pull_is_said_and_the_build_offered(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = engine_with(monkeypatch)  # the registry's config answers, its pull does not (engine.registry empty)
    registry(monkeypatch, Client({MINE: config(project_image(MINE, OLD))}))
    code, _, err = cli(capsys, "run", "--repo", TEAM, "--", "true")
    assert code == 1 and engine.pulled == [MINE]
    assert f"torchyard: not pulled (pull {MINE}: manifest unknown)" in err.splitlines()
    assert err.splitlines()[-1].startswith("torchyard: error: the image of project my-model")


def test_without_a_registry_host_in_repo_only_the_local_engine_is_asked(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)
    client = registry(monkeypatch, Client({}))
    assert cli(capsys, "run", "--", "true")[0] == 1
    assert client.asked == []


# --- the registry locator ---------------------------------------------------------------------------------


def wanted(base_tag: str = OLD_TAG) -> ProjectWanted:
    return ProjectWanted("my-model", OLD, "linux/amd64", "runtime", base_tag)


def judge() -> Any:
    m = real()
    return judge_here(m, probe(m, machine(RTX4090_535, driver="535.104.05")))


def test_the_newest_built_of_the_fitting_images_wins() -> None:
    client = Client({
        OLDER: config(project_image(OLDER, OLD), created="2026-12-03T10:00:00Z"),
        MINE: config(project_image(MINE, OLD), created="2026-12-01T10:00:00Z"),
    })  # fmt: skip
    found, why = project_in_registry(wanted(), judge(), TEAM, client)  # type: ignore[arg-type]
    assert found is not None and (found.where, found.reference, found.holds, why) == (Where.REPOSITORY, OLDER, OLD, "")


def test_only_project_tags_are_read_those_over_the_chosen_stem_first() -> None:
    stray = f"{TEAM}/my-model:latest"
    elsewhere = f"{TEAM}/my-model:2.15.0-cuda13.2-cudnn9-py3.13-debian13-runtime-p0000000000ff"
    base = holding(f"{TEAM}/my-model:{OLD_TAG}", OLD)  # a base image pushed under the project's repository
    client = Client({stray: config(base), elsewhere: config(base), MINE: config(base), OLDER: config(base)})
    found, why = project_in_registry(wanted(), judge(), TEAM, client)  # type: ignore[arg-type]
    assert found is None and why == f"no image of project my-model over {OLD} that runs here is in {TEAM}/my-model"
    assert client.asked == [f"tags {TEAM}/my-model", MINE.rpartition(":")[2], OLDER.rpartition(":")[2],
                            elsewhere.rpartition(":")[2]]  # fmt: skip


def test_the_budget_bounds_the_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(0, 100, 1))
    monkeypatch.setattr("builder.host.project_remote.monotonic", lambda: float(next(ticks)))
    client = Client({MINE: config(project_image(MINE, OLD)), OLDER: config(project_image(OLDER, OLD))})
    found, why = project_in_registry(wanted(), judge(), TEAM, client)  # type: ignore[arg-type]
    assert found is not None and (found.reference, why) == (MINE, "")
    assert len([a for a in client.asked if not a.startswith("tags")]) == 1


# --- doctor: the same locator, the same registry --------------------------------------------------------------


def test_doctor_finds_the_project_image_in_the_team_repository_and_its_run_line_runs_as_printed(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)  # nothing local: another machine than the one that built and pushed it
    registry(monkeypatch, Client({MINE: config(project_image(MINE, OLD))}))
    code, out, err = cli(capsys, "doctor", "--repo", TEAM)
    assert code == 0, err
    assert f"  where:    in the team's repository ({MINE}): run pulls it\n" in out
    assert "  runs here: yes\n" in out and "  registry: " not in out
    run = f"torchyard run --repo {TEAM}"
    assert f"  run it:   {run}\n" in out
    code, _, err = cli(capsys, *run.split()[1:], "--dry-run")  # the printed line, as typed
    assert code == 0 and f"torchyard: the project's image: {MINE} ({OLD}), in the team's repository" in err
    code, out, _ = cli(capsys, "doctor", "--repo", TEAM, "--json")
    assert json.loads(out)["project"] | {"runs_here": ""} == {
        "name": "my-model",
        "combination": OLD,
        "image": MINE,
        "where": "repository",
        "runs_here": "",
        "build": "torchyard build",
    }


def test_doctor_says_why_the_registry_has_no_image_of_the_project(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)
    registry(monkeypatch, Client({}, PushError("registry 127.0.0.1:5000 is unreachable: refused")))
    code, out, err = cli(capsys, "doctor", "--repo", TEAM)
    assert code == 0, err
    assert "  where:    not built yet: `torchyard build` in the project builds it\n" in out
    assert f"  registry: the registry of {TEAM}/my-model is not reachable (registry 127.0.0.1:5000 is " \
        "unreachable: refused)\n" in out  # fmt: skip
    assert "  run it:   torchyard run --yes (builds it first)\n" in out
    registry(monkeypatch, Client({}))
    code, out, _ = cli(capsys, "doctor", "--repo", TEAM)
    assert f"  registry: no image of project my-model over {OLD} that runs here is in {TEAM}/my-model\n" in out


def test_doctor_without_a_registry_host_asks_no_registry(
    folder: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine_with(monkeypatch)
    client = registry(monkeypatch, Client({}))
    code, out, _ = cli(capsys, "doctor")  # the default repository, `torchyard`: local engines only
    assert code == 0 and client.asked == [] and "  registry: " not in out
