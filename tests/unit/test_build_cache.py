"""The registry build cache (issue 43 item 4): `build --cache REPO` becomes buildx's cache-from / cache-to with one
tag per target, a hostile value never reaches buildx's option lists, an engine that cannot export a cache is one
line before any build, and the exported GitHub matrix's builds carry it."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from publish_kit import matrix_with

import builder.engine.images
import builder.engine.probe
from builder.cli.main import main
from builder.core.errors import EngineError, UsageError
from builder.core.kinds import Flavor
from builder.core.process import Completed
from builder.engine import BuildRequest, DockerEngine, EngineInfo, build_command
from builder.engine.build_failure import explain
from builder.engine.buildkit_log import BuildkitLog
from builder.engine.images import cache_flags
from builder.engine.probe import buildx_driver, cache_problem
from builder.pipeline.plan import build_request, cache_tag, make_plan
from builder.publish.export import github_matrix
from builder.publish.items import expand
from builder.publish.plan import plan_publish

CACHE = "ghcr.io/acme/cache"
REQUEST = BuildRequest(context=Path("/c"), dockerfile=Path("/c/Dockerfile"), target="runtime", cache=f"{CACHE}:t")
CONTAINERD = EngineInfo("26.1.5", "1.45", "/usr/bin/docker", True, containerd_store=True)
GRAPH = EngineInfo("26.1.5", "1.45", "/usr/bin/docker", True)
CLASSIC = EngineInfo("20.10.24", "1.41", "/usr/bin/docker", False)
CPU_SET = (
    '[[publish]]\nname = "cpu"\ntorch = "==2.14.1"\nvariants = ["cpu"]\nos = ["debian12"]\nflavors = ["runtime"]\n'
)
CPU = ("--any-host", "--torch", "2.14.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12")


def test_the_cache_is_read_and_written_mode_max_before_the_context() -> None:
    argv = build_command(REQUEST, buildx=True)
    assert argv[-5:] == [
        "--cache-from", f"type=registry,ref={CACHE}:t", "--cache-to", f"type=registry,ref={CACHE}:t,mode=max", "/c",
    ]  # fmt: skip
    assert "--cache-from" not in build_command(BuildRequest(context=Path("/c"), dockerfile=Path("/c/D"), target="x"))


@pytest.mark.parametrize("ref", ["r/c:t,mode=min", "r/c:t type=local", "r/c=x:t", "r/c:t\n--push", "-r/c:t"])
def test_a_ref_that_could_add_a_buildx_option_never_reaches_the_argv(ref: str) -> None:
    with pytest.raises(UsageError, match=r"^--cache: "):
        cache_flags(ref)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("ghcr.io/acme/cache,mode=min", "is not an image repository: the path component 'cache,mode=min'"),
        ("ghcr.io/acme/cache type=local", "is not an image repository: it contains whitespace"),
        ("ghcr.io/acme/c=x", "is not an image repository: the path component 'c=x'"),
        ("ghcr.io/acme/cache:main", "names a tag; give the repository alone (torchyard tags it per target)"),
        ("", "is not an image repository: it is empty"),
    ],
)
def test_a_bad_cache_flag_is_one_line_and_exit_2(
    value: str, line: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["build", *CPU, "--dry-run", "--cache", value, "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(f"torchyard: error: --cache: {value!r} {line}") and err.count("\n") == 1, err


def test_the_dry_run_prints_the_buildx_command_with_the_targets_cache_tag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["build", *CPU, "--dry-run", "--cache", CACHE, "-o", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert exit_.value.code == 0, out
    [line] = [line for line in out.splitlines() if "--cache-to" in line]
    argv = shlex.split(line)
    assert argv[:3] == ["docker", "buildx", "build"]
    ref = f"{CACHE}:torch2.14.1-cpu-py3.11-debian12-runtime"
    assert argv[-5:-1] == [
        "--cache-from",
        f"type=registry,ref={ref}",
        "--cache-to",
        f"type=registry,ref={ref},mode=max",
    ]


def test_each_target_has_a_cache_tag_of_its_own(tmp_path: Path) -> None:
    """An export replaces its tag's cache: two targets under one tag would keep only the last build's stages."""
    m = matrix_with(CPU_SET, tmp_path)
    [item] = expand(m)[0]
    plan = make_plan(m, item.combo, item.options)
    tags = {cache_tag(plan, flavor) for flavor in (Flavor.RUNTIME, Flavor.DEVEL)}
    assert tags == {f"{plan.id}-runtime", f"{plan.id}-devel"}
    request = build_request(plan, Flavor.RUNTIME, tmp_path, "r/x", {}, cache="r/cache")
    assert request.cache == f"r/cache:{plan.id}-runtime"
    assert build_request(plan, Flavor.RUNTIME, tmp_path, "r/x", {}).cache is None


# --- what the engine can do -----------------------------------------------------------------------------------


def drivers(monkeypatch: pytest.MonkeyPatch, said: str) -> list[list[str]]:
    asked: list[list[str]] = []

    def output(argv: list[str]) -> str:
        asked.append(argv)
        return said

    monkeypatch.setattr(builder.engine.probe, "_output", output)
    return asked


def test_an_engine_without_buildx_is_told_so() -> None:
    assert cache_problem(CLASSIC) == (
        "--cache: a registry build cache needs the buildx plugin, and /usr/bin/docker has none "
        "(install docker-buildx-plugin, or build without --cache)"
    )


def test_the_containerd_store_exports_without_asking_buildx(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = drivers(monkeypatch, "Driver: docker\n")
    assert cache_problem(CONTAINERD) is None and asked == []


def test_the_graph_driver_store_exports_only_through_another_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    drivers(monkeypatch, "Name:   default\nDriver:        docker\n")
    problem = cache_problem(GRAPH)
    assert problem is not None and problem.startswith(
        "--cache: the Docker 26.1.5 engine's default builder cannot export a build cache from the graph driver's "
        'image store: turn on the containerd image store ("features": {"containerd-snapshotter": true}'
    )
    asked = drivers(monkeypatch, "Name:   ci\nDriver:        docker-container\n")
    assert cache_problem(GRAPH) is None and asked == [["/usr/bin/docker", "buildx", "inspect"]]


def test_a_builder_that_says_no_driver_is_taken_for_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    drivers(monkeypatch, "")
    assert buildx_driver("docker") == "docker"


def test_the_engine_refuses_before_running_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Sequence[str]] = []

    def run_command(
        argv: Sequence[str], *, env: Mapping[str, str] | None = None, on_line: Callable[[str], None] | None = None
    ) -> Completed:
        ran.append(argv)
        return Completed(tuple(argv), 1, ())

    monkeypatch.setattr(builder.engine.images, "run_command", run_command)
    engine = DockerEngine()
    monkeypatch.setattr(engine, "info", lambda: CLASSIC)
    with pytest.raises(EngineError, match=r"^--cache: a registry build cache needs the buildx plugin"):
        engine.build(REQUEST, lambda line: None)
    assert ran == []


# --- the exported GitHub matrix --------------------------------------------------------------------------------


def test_the_github_matrix_builds_read_and_write_the_cache_repo(tmp_path: Path) -> None:
    m = matrix_with(CPU_SET, tmp_path)
    pplan = plan_publish(m, expand(m)[0], [])
    for job in github_matrix(pplan, "ghcr.io/acme/torch", "ghcr.io/acme/c", None, cache_repo=CACHE)["include"]:
        assert shlex.split(job["build"])[-5:] == ["--cache", CACHE, "--repo", "ghcr.io/acme/c", "--push"]
    for job in github_matrix(pplan, "ghcr.io/acme/torch", "ghcr.io/acme/c", None)["include"]:
        assert "--cache" not in shlex.split(job["build"])


# --- a first build: no cache to read yet ------------------------------------------------------------------------

FIRST_BUILD = """#4 importing cache manifest from 127.0.0.1:5000/two/cache:t
#4 ERROR: failed to configure registry cache importer: 127.0.0.1:5000/two/cache:t: not found
#11 [build 2/2] RUN uv pip install torch
#11 4.228   cause: failed to lookup address information: Name or service not known
#11 ERROR: process "/bin/sh -c uv pip install torch" did not complete successfully: exit code: 2"""


def test_a_cache_not_written_yet_is_not_the_failing_step() -> None:
    """BuildKit says it could not read the cache (an ERROR line) and builds on without it: the line names the step
    that failed the build."""
    log = BuildkitLog()
    for line in FIRST_BUILD.splitlines():
        log.feed(line)
    line = explain(log, 1)
    assert line.startswith("build step [build 2/2] RUN uv pip install torch failed (exit code 2): "), line
    assert "more failed" not in line and "cache" not in line
