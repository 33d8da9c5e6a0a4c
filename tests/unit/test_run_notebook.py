"""`torchyard run --notebook` on recorded machines (host_kit): the docker run line (--dry-run) publishes the port on
127.0.0.1 with -p, has no --network host, the caller's UID with group 100, the work folder, the token by name only;
the notebook image is the one located for this machine (never a runtime image); the background container is waited
for until healthy, its URL printed, its logs followed, and it is removed on every way out but --detach. The engine
is faked at its seams (QuickEngine's reads; builder.engine.detached.Detached, the notebook's docker CLI calls)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from host_kit import DOCKER_WITH_TOOLKIT, RTX4090_535, FakeSystem, RunEngine, holding, machine
from matrix_kit import real
from test_run import CDI, CDI_SPEC, ME, install

from builder.cli.main import main
from builder.core.kinds import Flavor
from builder.engine.detached import State
from builder.engine.interactive import ContainerSpec, docker_run_argv
from builder.host import notebook_launch
from builder.host.doctor import diagnose
from builder.host.notebook_launch import not_ready, refuse_for_notebook, wait_ready
from builder.host.probe import probe
from builder.host.runtime import read_runtime
from builder.resolve.query import RawQuery

M = real()
GPU = machine(RTX4090_535, driver="535.104.05")
CDI_HOST = machine(RTX4090_535, driver="535.104.05", toolkit=False, files=CDI_SPEC)
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]{48})")


@dataclass
class FakeContainers:
    """Detached at its seam: the states `state` answers in turn (the last one repeats), what was started, with
    which secrets, stopped; `follow` raises `follow_error` when set."""

    states: list[State | None] = field(default_factory=lambda: [State("running", "starting"), State("running",
                                                                "healthy")])  # fmt: skip
    started: list[tuple[ContainerSpec, dict[str, str]]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    follow_error: BaseException | None = None
    log_text: str = "[I ServerApp] Jupyter Server 2.x is running\n[E] something broke\n"

    def start(self, spec: ContainerSpec, secrets: dict[str, str]) -> None:
        self.started.append((spec, dict(secrets)))

    def state(self, name: str) -> State | None:
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def logs(self, name: str, lines: int) -> str:
        return self.log_text

    def follow(self, name: str) -> None:
        self.followed.append(name)
        if self.follow_error is not None:
            raise self.follow_error

    def stop(self, name: str) -> None:
        self.stopped.append(name)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


Notebook = Callable[..., Ran]


def notebook_image(system: FakeSystem, docker: dict[str, Any]) -> tuple[str, str]:
    """(the notebook image doctor's chooser names for this machine, its combination)."""
    d = diagnose(M, probe(M, system), read_runtime(system, lambda: docker), RawQuery(), "torchyard",
                 flavor=Flavor.NOTEBOOK)  # fmt: skip
    assert d.recommended is not None
    return d.recommended.image, d.recommended.result.combo.id


@pytest.fixture
def notebook(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Notebook:
    def invoke(
        *args: str,
        system: FakeSystem = GPU,
        docker: dict[str, Any] = DOCKER_WITH_TOOLKIT,
        engine: RunEngine | None = None,
        containers: FakeContainers | None = None,
    ) -> Ran:
        install(engine or RunEngine(), monkeypatch, system, docker)
        monkeypatch.setattr("builder.cli.run_cmd.Detached", lambda: containers or FakeContainers())
        monkeypatch.setattr("builder.host.notebook_launch.POLL", 0.0)
        with pytest.raises(SystemExit) as exited:
            main(["run", "--notebook", *args])
        out, err = capsys.readouterr()
        return Ran(int(exited.value.code or 0), out, err)

    return invoke


def local_notebook(system: FakeSystem = GPU, docker: dict[str, Any] = DOCKER_WITH_TOOLKIT) -> RunEngine:
    ref, combination = notebook_image(system, docker)
    return RunEngine(images={ref: holding(ref, combination, flavor="notebook")})


@pytest.mark.parametrize(
    ("system", "docker", "flags"),
    [(GPU, DOCKER_WITH_TOOLKIT, ["--gpus", "all"]), (CDI_HOST, CDI, ["--device", "nvidia.com/gpu=all"])],
    ids=["toolkit", "cdi"],
)
def test_dry_run_publishes_the_port_on_localhost_with_the_callers_uid_and_no_host_network(
    notebook: Notebook, system: FakeSystem, docker: dict[str, Any], flags: list[str]
) -> None:
    result = notebook("--dry-run", system=system, docker=docker)
    assert result.code == 0, result.err
    argv = shlex.split(result.out)
    name = argv[argv.index("--name") + 1]
    assert name.startswith("torchyard-notebook-")
    assert "--network" not in " ".join(argv) and "--net=" not in " ".join(argv) and "--rm" not in argv
    user = caller_name()
    assert argv == [
        "docker", "run", "--name", name, "-d", *flags, "--ipc=host",
        "-v", f"{os.getcwd()}:/home/jovyan/work", "-w", "/home/jovyan/work",
        "--user", ME, "-e", "HOME=/home/jovyan", "-e", f"USER={user}", "-e", f"LOGNAME={user}",
        *(["-e", "NB_UID=0", "-e", "NB_GID=0"] if ME.startswith("0:") else []),  # a root shell's caller: root
        "-e", "JUPYTER_TOKEN", "-p", "127.0.0.1:8888:8888", "--group-add", "100",
        notebook_image(system, docker)[0],
    ]  # fmt: skip
    assert argv[-1].endswith("-notebook")
    assert "--target notebook" in result.err  # not local: the build line that makes it


def caller_name() -> str:
    from builder.host.identity import caller

    return caller().name


def test_port_is_published_as_given_and_a_base_url_is_in_the_printed_url(notebook: Notebook) -> None:
    containers = FakeContainers()
    result = notebook("--port", "9999", "--detach", "--", "-e", "JUPYTER_BASE_URL=/lab-x/", "--",
                      engine=local_notebook(), containers=containers)  # fmt: skip
    assert result.code == 0, result.err
    ((spec, secrets),) = containers.started
    argv = docker_run_argv(spec)
    assert argv[argv.index("-p") + 1] == "127.0.0.1:9999:8888"
    assert result.out == f"http://127.0.0.1:9999/lab-x/lab?token={secrets['JUPYTER_TOKEN']}\n"


def test_detach_prints_the_url_whose_token_is_only_in_the_clis_environment(notebook: Notebook) -> None:
    containers = FakeContainers()
    result = notebook("--detach", engine=local_notebook(), containers=containers)
    assert result.code == 0, result.err
    ((spec, secrets),) = containers.started
    found = URL.fullmatch(result.out.strip())
    assert found is not None and found[1] == "8888"
    assert secrets == {"JUPYTER_TOKEN": found[2]}
    argv = docker_run_argv(spec)
    assert "JUPYTER_TOKEN" in argv and found[2] not in " ".join(argv) and found[2] not in result.err
    assert containers.stopped == [] and containers.followed == []  # left running
    assert f"docker rm -f {spec.name}" in result.err


def test_without_detach_the_logs_follow_and_the_container_is_removed_with_its_exit_code(notebook: Notebook) -> None:
    containers = FakeContainers(states=[State("running", "healthy"), State("exited", "unhealthy", 3)])
    result = notebook(engine=local_notebook(), containers=containers)
    assert result.code == 3, result.err
    ((spec, _),) = containers.started
    assert containers.followed == [spec.name] and containers.stopped == [spec.name]
    assert URL.fullmatch(result.out.strip())


@pytest.mark.parametrize(("signal_exit", "code"), [(False, 130), (True, 143)], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_while_following_stops_and_removes_it(
    notebook: Notebook, monkeypatch: pytest.MonkeyPatch, signal_exit: bool, code: int
) -> None:
    import builder.cli.main

    if signal_exit:
        monkeypatch.setattr(builder.cli.main._TERMINATED, "is_set", lambda: True)
    containers = FakeContainers(follow_error=KeyboardInterrupt())
    result = notebook(engine=local_notebook(), containers=containers)
    assert result.code == code
    ((spec, _),) = containers.started
    assert containers.stopped == [spec.name]
    assert result.err.strip().splitlines()[-1] == (
        f"torchyard: error: interrupted: notebook container {spec.name} stopped and removed"
    )


def test_an_unhealthy_server_prints_its_last_lines_is_removed_and_exits_4(
    notebook: Notebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notebook_launch, "READY_TIMEOUT", 0.3)  # unhealthy is final only at the deadline
    monkeypatch.setattr(notebook_launch, "POLL", 0.05)
    containers = FakeContainers(states=[State("running", "starting"), State("running", "unhealthy")])
    result = notebook("--detach", engine=local_notebook(), containers=containers)
    assert result.code == 4
    ((spec, _),) = containers.started
    assert containers.stopped == [spec.name] and result.out == ""
    assert "torchyard:   | [E] something broke" in result.err
    assert result.err.strip().splitlines()[-1].startswith("torchyard: error: the notebook server in ")
    assert "its health check failed (unhealthy)" in result.err


@pytest.mark.parametrize(
    "args",
    [("--", "--network", "host", "--"), ("--", "--network=host", "--"), ("--", "--net", "host", "--")],
    ids=["--network host", "--network=host", "--net host"],
)
def test_host_network_is_refused_in_one_line_exit_2(notebook: Notebook, args: tuple[str, ...]) -> None:
    result = notebook("--dry-run", *args)
    assert result.code == 2
    assert result.err == (
        "torchyard: error: run --notebook: --network host would drop the published port; leave it out (--port PORT)\n"
    )


def test_a_command_is_refused_and_detach_needs_notebook() -> None:
    with pytest.raises(Exception, match="no command"):
        refuse_for_notebook((), ("python",))
    refuse_for_notebook(("--network", "bridge"), ())  # another network is the user's


def test_detach_without_notebook_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--detach", "--dry-run"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "torchyard: error: run: --detach and --port go with --notebook\n"


def test_a_local_runtime_image_is_not_taken_for_the_notebook(notebook: Notebook) -> None:
    """The locator's "another local image that runs here" is of the notebook flavor too."""
    ref, combination = notebook_image(GPU, DOCKER_WITH_TOOLKIT)
    runtime = ref.replace("-notebook", "-runtime")
    engine = RunEngine(images={runtime: holding(runtime, combination)})
    result = notebook("--dry-run", engine=engine)
    assert result.code == 0, result.err
    assert shlex.split(result.out)[-1] == ref
    assert f"{ref} is not in the local engine" in result.err


def test_unhealthy_is_waited_out_until_the_deadline_and_a_slow_start_that_recovers_is_ready() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 1.0

    unhealthy: list[State | None] = [State("running", "unhealthy")]
    recovers = FakeContainers(states=unhealthy * 3 + [State("running", "healthy")])
    assert wait_ready(recovers, "c", 10.0, clock=lambda: now[0], sleep=sleep) is None
    now[0] = 0.0
    stays = FakeContainers(states=unhealthy)
    assert wait_ready(stays, "c", 5.0, clock=lambda: now[0], sleep=sleep) == "its health check failed (unhealthy)"
    assert now[0] > 5.0, "given up only at the deadline"


def test_wait_ready_gives_up_after_its_timeout() -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += 1.0

    containers = FakeContainers(states=[State("running", "starting")])
    assert wait_ready(containers, "c", 5.0, clock=lambda: now[0], sleep=sleep) == (
        "its health check had not passed after 5 s"
    )


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (None, "the container is gone"),
        (State("exited", None, 1), "the container exited (code 1)"),
        (
            State("running", None),
            "the image has no HEALTHCHECK: not a torchyard notebook image (torchyard build --target notebook)",
        ),
        (State("running", "starting"), None),
        (State("running", "healthy"), None),
    ],
)
def test_not_ready_says_why(state: State | None, said: str | None) -> None:
    assert not_ready(state) == said


@pytest.mark.parametrize(("user", "root_env"), [("0:0", True), ("1000:1000", False), (None, False)])
def test_a_root_caller_keeps_the_server_root_and_any_other_gets_no_nb_uid(user: str | None, root_env: bool) -> None:
    from builder.engine.interactive import ContainerSpec
    from builder.host.notebook_launch import notebook_spec

    spec = notebook_spec(ContainerSpec(image="img", name="n", user=user), 8888)
    assert (("NB_UID=0" in spec.env) and ("NB_GID=0" in spec.env)) is root_env
    assert spec.env[-1] == "JUPYTER_TOKEN" and not any(e.startswith("NB_UID=") and e != "NB_UID=0" for e in spec.env)


def test_a_combination_without_a_notebook_image_gets_the_reason_not_a_build_line_that_fails(notebook: Notebook) -> None:
    result = notebook("--dry-run", "--python", "3.10", "--os", "ubuntu22.04")
    assert result.code == 1, result.out + result.err
    assert "has no notebook image: ipykernel 7.4.0 requires Python >=3.11" in result.err
    assert "--target notebook" not in result.err and "torchyard build" not in result.err
