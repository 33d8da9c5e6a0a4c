"""`torchyard run`'s steps (host.launch) called one by one on recorded machines, at their edges (written for the
survivors of `bench/mutation.py host`, docs/mutation.md): the line when no image runs here, the launch for the
chosen image and for a given one, where the image comes from (here, pulled, built by `torchyard build` or
not), and a given image judged, refused or forced. The engine is host_kit's RunEngine; the build's process is
a recorder in place of run_command, so nothing starts."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from fake_engine import BUILD_LINES
from host_kit import CUDA13_LABELS, DOCKER_WITH_TOOLKIT, RTX4090_535, RunEngine, image, machine
from matrix_kit import query, real, small

import builder.host.launch
from builder.core.errors import BuildError, EngineError, NoMatchError, PushError
from builder.core.process import Completed
from builder.engine.interactive import ContainerSpec
from builder.host.doctor import Diagnosis, diagnose
from builder.host.identity import Caller
from builder.host.launch import SHELL, Launch, RunRequest, build, fetch, obtain, prepare, will_not_run
from builder.host.probe import probe
from builder.host.runtime import RuntimeReading, read_runtime
from builder.resolve.query import RawQuery

ME = Caller(1000, 1000, "me")

M = real()
S = small()  # matrix_kit's own: its messages do not move with matrix.toml
REPO = "127.0.0.1:5000/team/torch"
NO_GPU = probe(S, machine(None, toolkit=False))
CPU_NOTE = (
    "no GPU here (no NVIDIA driver: nvidia-smi is not installed and no kernel module is loaded): the container "
    "will use the CPU"
)
# The one image small() has for a machine without a GPU, and the `torchyard build` words that make it.
CPU_TAG = "2.5.1-cpu-py3.11-debian12-runtime"
CPU_BUILD = ("build", "--torch", "2.5.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12")
ARM64 = "the image is linux/arm64, this machine linux/amd64"
RTX = machine(RTX4090_535, driver="535.104.05")
TOOLKIT = read_runtime(RTX, lambda: DOCKER_WITH_TOOLKIT)


def request(**flags: Any) -> RunRequest:
    given: dict[str, Any] = {"workspace": "/home/me/project", "who": ME} | flags
    return RunRequest(**given)


def no_diagnosis(*_: object) -> Diagnosis:
    raise AssertionError("the doctor was asked to choose for a given image that runs here")


@dataclass
class MayBuild:
    """obtain's `may_build`: the launches it was asked about, and its answer."""

    answer: bool
    asked: list[Launch] = field(default_factory=list)

    def __call__(self, launch: Launch) -> bool:
        self.asked.append(launch)
        return self.answer


@dataclass
class Builds:
    """run_command for launch.build: the argv it ran, BUILD_LINES streamed, `code` as the exit; a build that exits
    0 puts the image `makes` in `engine` (None: it leaves none)."""

    engine: RunEngine
    makes: str | None
    code: int = 0
    ran: list[list[str]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str], *, on_line: Callable[[str], None] | None = None, **_: Any) -> Completed:
        self.ran.append(list(argv))
        for line in BUILD_LINES:
            if on_line is not None:
                on_line(line)
        if self.code == 0 and self.makes is not None:
            self.engine.images[self.makes] = image()
        return Completed(tuple(argv), self.code, BUILD_LINES)


def builds(monkeypatch: pytest.MonkeyPatch, engine: RunEngine, makes: str | None, code: int = 0) -> Builds:
    recorder = Builds(engine, makes, code)
    monkeypatch.setattr(builder.host.launch, "run_command", recorder)
    return recorder


# --- prepare: no image runs here ---------------------------------------------------------------------------------


def test_no_image_for_this_machine_names_every_problem_the_doctor_found_with_the_runtime() -> None:
    no_engine = RuntimeReading(engine=None)  # the doctor's problem with it is in the line: it was asked
    with pytest.raises(NoMatchError) as refused:
        prepare(S, NO_GPU, no_engine, request(wish=RawQuery(torch="==1.0")), RunEngine())
    assert str(refused.value) == (
        "no image runs on this machine: no torch release in the matrix matches --torch ==1.0 (newest: 2.5.1); "
        "no Docker engine answers (torchyard doctor says more)"
    )


def test_no_image_and_no_problem_from_the_doctor_says_no_combination_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.host.launch.diagnose", lambda m, host, runtime, *_: Diagnosis(host, runtime, query(S)))
    with pytest.raises(NoMatchError) as refused:
        prepare(S, NO_GPU, None, request(), RunEngine())
    assert str(refused.value) == "no image runs on this machine: no combination fits (torchyard doctor says more)"


# --- prepare: the launch ---------------------------------------------------------------------------------------


def test_the_chosen_image_s_launch_has_the_request_s_container_and_its_build_with_the_same_matrix() -> None:
    engine = RunEngine()
    flags = {"shm_size": "16g", "env": ("A=1",), "docker_args": ("--network", "host"), "tty": True}
    launch = prepare(S, NO_GPU, None, request(command=("python", "-c", "1"), repo=REPO, **flags), engine)
    assert launch.spec == ContainerSpec(
        image=f"{REPO}:{CPU_TAG}",
        command=("python", "-c", "1"),
        name=launch.spec.name,  # a fresh one each run
        gpu_flags=(),
        shm_size="16g",
        workspace="/home/me/project",
        user="1000:1000",
        env=("USER=me", "LOGNAME=me", "A=1"),
        tty=True,
        extra=("--network", "host"),
    )
    assert (launch.host, launch.local, launch.notes, launch.matrix_path) == (NO_GPU, False, (CPU_NOTE,), "small.toml")
    assert launch.build == (*CPU_BUILD, "--platform", "linux/amd64", "--repo", REPO)
    recommended = launch.recommend()
    assert recommended is not None and recommended.image == launch.image


def test_a_given_image_that_is_here_and_runs_is_launched_without_asking_the_doctor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("builder.host.launch.diagnose", no_diagnosis)
    engine = RunEngine(images={"debian:bookworm-slim": image()})
    launch = prepare(S, NO_GPU, None, request(image="debian:bookworm-slim", who=None), engine)
    assert launch.spec == ContainerSpec(
        image="debian:bookworm-slim", command=SHELL, name=launch.spec.name, workspace="/home/me/project"
    )
    assert (launch.local, launch.notes, launch.build, launch.matrix_path) == (True, (CPU_NOTE,), None, "small.toml")


# --- a given image judged -----------------------------------------------------------------------------------


def test_a_given_image_refused_where_no_image_runs_names_none_instead() -> None:
    engine = RunEngine(images={"team/torch:arm64": image(platform="linux/arm64")})
    with pytest.raises(NoMatchError) as refused:
        prepare(S, NO_GPU, None, request(image="team/torch:arm64", wish=RawQuery(torch="==1.0")), engine)
    assert str(refused.value) == f"team/torch:arm64 will not run here: {ARM64} (--force to run it)"


def test_every_reason_a_given_image_will_not_run_is_said_refused_and_forced() -> None:
    host, ref = probe(M, RTX), "team/torch:cu130"
    engine = RunEngine(images={ref: image(CUDA13_LABELS)})
    reasons, unchecked = will_not_run(M, host, ref, engine.images[ref], engine)
    assert (reasons[0], len(reasons), unchecked) == ("driver 535.104.05: every CUDA 13 build needs >= 580.65.06", 2, [])
    chosen = diagnose(M, host, TOOLKIT, RawQuery(), "torchyard").recommended
    assert chosen is not None
    with pytest.raises(NoMatchError) as refused:
        prepare(M, host, TOOLKIT, request(image=ref), engine)
    assert str(refused.value) == (
        f"{ref} will not run here: {reasons[0]}; {reasons[1]}; the image that runs here: {chosen.image} "
        "(--force to run it)"
    )
    forced = prepare(M, host, TOOLKIT, request(image=ref, force=True), engine)
    assert forced.notes == (f"{ref} will not run here ({reasons[0]}; {reasons[1]}): running it anyway (--force)",)


def test_a_given_image_whose_facts_cannot_be_read_runs_with_a_note_saying_so() -> None:
    ref = "team/torch:cu130"
    engine = RunEngine(images={ref: image(CUDA13_LABELS)}, read_error=EngineError(f"could not open {ref}: gone"))
    launch = prepare(M, probe(M, RTX), TOOLKIT, request(image=ref), engine)
    assert launch.notes == (
        f"not checked whether {ref} runs on these GPUs: could not open {ref}: gone",
        f"the user has no name inside (could not open {ref}: gone)",  # its /etc/passwd could not be read either
    )
    assert launch.spec.files == () and launch.spec.env == ("USER=me", "LOGNAME=me")


# --- obtain: pulled ------------------------------------------------------------------------------------------


def test_the_chosen_image_pulled_from_the_team_repository_is_taken_as_it_is() -> None:
    ref = f"{REPO}:{CPU_TAG}"
    engine = RunEngine(registry={ref: image(platform="linux/arm64")})  # not judged again: the doctor chose it
    said: list[str] = []
    launch = prepare(S, NO_GPU, None, request(repo=REPO), engine)
    obtained = obtain(S, launch, engine, request(repo=REPO), MayBuild(False), said.append)
    assert obtained == replace(launch, local=True)
    assert (engine.pulled, said) == ([ref], [f"{ref} is not in the local engine: pulling it"])


def test_a_chosen_image_not_pulled_and_not_to_be_built_gets_the_command_that_builds_it() -> None:
    ref, engine, said, may_build = f"{REPO}:{CPU_TAG}", RunEngine(), list[str](), MayBuild(False)
    launch = prepare(S, NO_GPU, None, request(repo=REPO), engine)
    with pytest.raises(NoMatchError) as refused:
        obtain(S, launch, engine, request(repo=REPO), may_build, said.append)
    assert str(refused.value) == (
        f"{ref} is not here and not in the team's repository (--repo / TORCHYARD_REPO): build it with "
        f"`torchyard {' '.join(CPU_BUILD)} --platform linux/amd64 --repo {REPO}` (minutes, GBs of wheels), or run "
        "again with --yes to build it now"
    )
    assert may_build.asked == [launch]
    assert said == [f"{ref} is not in the local engine: pulling it", f"not pulled (pull {ref}: manifest unknown)"]


def test_a_given_image_pulled_that_will_not_run_is_run_when_forced() -> None:
    ref = "team/torch:arm64"
    engine = RunEngine(registry={ref: image(platform="linux/arm64")})
    forced = request(image=ref, force=True)
    launch = prepare(S, NO_GPU, None, forced, engine)
    obtained = obtain(S, launch, engine, forced, MayBuild(False), lambda _: None)
    note = f"{ref} will not run here ({ARM64}): running it anyway (--force)"
    assert obtained == replace(launch, local=True, notes=(CPU_NOTE, note))


def test_fetch_has_nothing_to_do_for_an_image_that_is_here_and_nothing_to_pull_without_a_source() -> None:
    engine, said = RunEngine(), list[str]()
    launch = prepare(S, NO_GPU, None, request(), engine)
    assert fetch(replace(launch, local=True), engine, said.append, pull=True) is True
    assert fetch(launch, engine, said.append, pull=False) is False
    assert (engine.pulled, said) == ([], [])
    given = replace(launch, build=None)  # a given image that is nowhere: the pull's own error
    with pytest.raises(PushError, match=r"^pull torchyard:2\.5\.1-cpu-py3\.11-debian12-runtime: manifest unknown$"):
        fetch(given, engine, said.append, pull=True)


# --- obtain: built ----------------------------------------------------------------------------------------------


def test_the_chosen_image_is_built_by_this_interpreter_with_the_same_matrix_its_output_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine, said, may_build = RunEngine(), list[str](), MayBuild(True)
    launch = prepare(S, NO_GPU, None, request(), engine)
    recorder = builds(monkeypatch, engine, launch.image)
    obtained = obtain(S, launch, engine, request(), may_build, said.append)
    assert obtained == replace(launch, local=True)
    words = (*CPU_BUILD, "--platform", "linux/amd64", "--repo", "torchyard")
    assert recorder.ran == [[sys.executable, "-m", "builder", "--matrix", "small.toml", *words]]
    assert said == [f"building: torchyard {' '.join(words)}", *BUILD_LINES]
    assert (may_build.asked, engine.pulled) == ([launch], [])  # no --repo: nothing to pull from


def test_a_build_that_leaves_no_image_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = RunEngine()
    launch = prepare(S, NO_GPU, None, request(), engine)
    builds(monkeypatch, engine, None)
    with pytest.raises(NoMatchError) as missing:
        obtain(S, launch, engine, request(), MayBuild(True), lambda _: None)
    assert str(missing.value) == f"torchyard:{CPU_TAG} is still not in the local engine"


@pytest.mark.parametrize("code", [1, 2])
def test_a_failed_build_is_a_build_error_with_its_exit_code(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    engine = RunEngine()
    launch = prepare(S, NO_GPU, None, request(), engine)
    builds(monkeypatch, engine, launch.image, code)
    with pytest.raises(BuildError) as failed:
        build(launch, lambda _: None)
    assert str(failed.value) == f"the build of torchyard:{CPU_TAG} failed (exit {code}); its output is above"
    assert engine.images == {}


def test_an_image_torchyard_did_not_choose_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    engine, said = RunEngine(), list[str]()
    given = replace(prepare(S, NO_GPU, None, request(), engine), build=None)
    recorder = builds(monkeypatch, engine, given.image)
    with pytest.raises(NoMatchError) as refused:
        build(given, said.append)
    assert str(refused.value) == (
        f"torchyard:{CPU_TAG} is not here and torchyard does not build images it did not choose"
    )
    assert (recorder.ran, said) == ([], [])


def test_a_local_image_that_does_not_know_the_caller_gets_its_passwd_with_the_caller_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    ref = "debian:bookworm-slim"
    passwd, group = b"root:x:0:0:root:/root:/bin/bash\n", b"root:x:0:\n"
    engine = RunEngine(images={ref: image()}, files={(ref, "/etc/passwd"): passwd, (ref, "/etc/group"): group})
    launch = prepare(S, NO_GPU, None, request(image=ref), engine)
    (passwd_file, at_passwd), (group_file, at_group) = launch.spec.files
    assert (at_passwd, at_group) == ("/etc/passwd", "/etc/group")
    assert Path(passwd_file).parent == tmp_path / "torchyard" / "identity"
    assert Path(passwd_file).read_bytes() == passwd + b"me:x:1000:1000:torchyard run:/tmp:/bin/sh\n"
    assert Path(group_file).read_bytes() == group + b"me:x:1000:\n"
    rooted = prepare(S, NO_GPU, None, request(image=ref, who=None), engine)  # --root: the image's own user
    assert (rooted.spec.files, rooted.spec.user, rooted.spec.env) == ((), None, ())
