"""The Docker seam itself (builder/engine/, builder/core/process.py), with its outside replaced:
`docker.from_env` by a fake SDK client, `subprocess` by fakes, `run_command` by a recorder.
No process is started and no engine is reached.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker
import pytest
import requests

import builder.core.process
import builder.engine
import builder.engine.images
import builder.engine.probe
from builder.core.errors import BuildError, EngineError, Interrupted, PushError
from builder.core.process import Completed, run_command
from builder.engine import (
    BuildRequest,
    DockerEngine,
    EngineInfo,
    Mount,
    RegistryAuth,
    build_command,
    find_build_client,
    split_ref,
)
from builder.engine.images import built_id, push_refusal

INFO_CLASSIC = EngineInfo("20.10.24", "1.41", "/usr/bin/docker", False)


# --- split_ref ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("127.0.0.1:5000/team/torch:2.14.1-cuda13.0-runtime", ("127.0.0.1:5000/team/torch", "2.14.1-cuda13.0-runtime")),
        ("127.0.0.1:5000/team/torch", ("127.0.0.1:5000/team/torch", "latest")),
        ("localhost:5000/img", ("localhost:5000/img", "latest")),
        ("torchyard:latest-runtime", ("torchyard", "latest-runtime")),
        ("torchyard", ("torchyard", "latest")),
        ("ghcr.io/org/img:v1", ("ghcr.io/org/img", "v1")),
    ],
)
def test_split_ref(ref: str, expected: tuple[str, str]) -> None:
    assert split_ref(ref) == expected


# --- find_build_client ----------------------------------------------------------------------------------------


@dataclass
class Clients:
    """docker CLIs on a pretend host: path -> (client version, has the buildx plugin)."""

    found: dict[str, tuple[str, bool]]
    on_path: str | None = None
    probes: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.probes.append(argv)
        version, buildx = self.found[argv[0]]
        if argv[1:] == ["buildx", "version"]:
            out = "github.com/docker/buildx v0.23.0\n" if buildx else ""
            return subprocess.CompletedProcess(argv, 0 if buildx else 1, out, "")
        assert argv[1:] == ["version", "--format", "{{.Client.Version}}"]
        return subprocess.CompletedProcess(argv, 0, version + "\n", "")


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Clients]:
    def make(found: dict[str, tuple[str, bool]], on_path: str | None = None, env: str | None = None) -> Clients:
        clients = Clients(found, on_path)
        monkeypatch.setattr("builder.engine.probe.shutil.which", lambda name: on_path)
        monkeypatch.setattr(builder.engine.probe, "Path", lambda p: SimpleNamespace(is_file=lambda: p in found))
        monkeypatch.setattr("builder.engine.probe.subprocess.run", clients.run)
        if env is None:
            monkeypatch.delenv("TORCHYARD_DOCKER", raising=False)
        else:
            monkeypatch.setenv("TORCHYARD_DOCKER", env)
        return clients

    return make


def test_a_client_with_buildx_is_taken(host: Callable[..., Clients]) -> None:
    clients = host({"/usr/local/bin/docker": ("28.1.1", True)}, on_path="/usr/local/bin/docker")
    assert find_build_client() == ("/usr/local/bin/docker", True)
    assert clients.probes == [["/usr/local/bin/docker", "buildx", "version"]]


def test_only_a_pre_23_client_is_used_with_docker_buildkit(host: Callable[..., Clients]) -> None:
    host({"/usr/bin/docker": ("20.10.24+dfsg1", False)}, on_path="/usr/bin/docker")
    assert find_build_client() == ("/usr/bin/docker", False)


def test_a_28_client_without_buildx_first_on_path_is_passed_over_for_a_20_client(
    host: Callable[..., Clients],
) -> None:
    # These machines: /usr/local/bin/docker 28.x (no buildx) first on PATH, Debian's 20.10 in /usr/bin.
    clients = host(
        {"/usr/local/bin/docker": ("28.1.1", False), "/usr/bin/docker": ("20.10.24+dfsg1", False)},
        on_path="/usr/local/bin/docker",
    )
    assert find_build_client() == ("/usr/bin/docker", False)
    assert [p[0] for p in clients.probes] == ["/usr/local/bin/docker", "/usr/bin/docker"] * 2


def test_only_a_28_client_without_buildx_says_what_to_install(host: Callable[..., Clients]) -> None:
    host({"/usr/local/bin/docker": ("28.1.1", False)}, on_path="/usr/local/bin/docker")
    with pytest.raises(EngineError) as raised:
        find_build_client()
    assert str(raised.value) == (
        "no BuildKit-capable docker CLI among /usr/local/bin/docker: install the buildx plugin "
        "(docker-buildx-plugin), or point $TORCHYARD_DOCKER at a docker client older than 23"
    )
    assert raised.value.exit_code == 3


def test_no_docker_cli_at_all(host: Callable[..., Clients]) -> None:
    host({})
    with pytest.raises(EngineError, match=r"^no docker CLI found .*install docker\.io or docker-ce-cli$"):
        find_build_client()


def test_torchyard_docker_is_tried_first(host: Callable[..., Clients]) -> None:
    host(
        {"/opt/docker-20/docker": ("20.10.24", False), "/usr/local/bin/docker": ("28.1.1", True)},
        on_path="/usr/local/bin/docker",
        env="/opt/docker-20/docker",
    )
    # buildx wins over the order of candidates: every client is asked for buildx first.
    assert find_build_client() == ("/usr/local/bin/docker", True)


def test_a_client_that_cannot_run_is_skipped(host: Callable[..., Clients], monkeypatch: pytest.MonkeyPatch) -> None:
    host({"/usr/bin/docker": ("20.10.24", False)}, on_path="/usr/bin/docker")

    def broken(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise OSError(8, "Exec format error")

    monkeypatch.setattr("builder.engine.probe.subprocess.run", broken)
    with pytest.raises(EngineError, match="no BuildKit-capable docker CLI among /usr/bin/docker"):
        find_build_client()


# --- the engine check: connection errors, too old -------------------------------------------------------------


class FakeImages:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def get(self, ref: str) -> Any:
        if ref not in self.client.images:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return self.client.images[ref]

    def remove(self, ref: str, noprune: bool = False) -> None:
        self.client.removed.append(ref)


@dataclass
class FakeContainer:
    exit_code: int = 0
    logs_text: str = "smoke output\n"
    status: str = "exited"
    fail_reload: BaseException | None = None
    removed: bool = False
    killed: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)
    start_error: Exception | None = None

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error

    def reload(self) -> None:
        if self.fail_reload is not None:
            raise self.fail_reload
        self.attrs = {"State": {"ExitCode": self.exit_code}}

    def logs(self) -> bytes:
        return self.logs_text.encode()

    def kill(self) -> None:
        self.killed = True

    def remove(self, force: bool = False) -> None:
        assert force
        self.removed = True


class FakeContainers:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def create(self, image: str, command: list[str], **kwargs: Any) -> FakeContainer:
        self.client.started.append((image, command, kwargs))
        if self.client.create_error is not None:
            raise self.client.create_error
        self.client.container.start_error = self.client.start_error
        return self.client.container

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> Sequence[Any]:
        assert all and filters == {"label": "io.torchyard.run-by", "status": "exited"}
        return [c for c in self.client.leftovers if not c.removed]


class FakeAPI:
    def __init__(self, client: FakeClient) -> None:
        self.client = client

    def push(self, repo: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.client.pushes.append((repo, kwargs))
        yield from self.client.push_events


@dataclass
class FakeClient:
    """The part of docker.DockerClient that DockerEngine uses."""

    version_info: dict[str, str] = field(default_factory=lambda: {"Version": "20.10.24", "ApiVersion": "1.41"})
    images: dict[str, Any] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    container: FakeContainer = field(default_factory=FakeContainer)
    start_error: Exception | None = None  # at start: the container was created (and must be removed)
    create_error: Exception | None = None
    started: list[tuple[str, list[str], dict[str, Any]]] = field(default_factory=list)
    push_events: list[dict[str, Any]] = field(default_factory=list)
    pushes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    version_calls: int = 0
    leftovers: list[Any] = field(default_factory=list)  # exited containers an earlier process started
    pings_before_gone: int | None = None  # the engine stops answering after this many pings
    info_answer: dict[str, Any] = field(default_factory=lambda: {"DriverStatus": [["Backing Filesystem", "extfs"]]})

    def ping(self) -> bool:
        if self.pings_before_gone is not None:
            if self.pings_before_gone <= 0:
                raise requests.ConnectionError(("Connection aborted.", ConnectionResetError(104, "reset by peer")))
            self.pings_before_gone -= 1
        return True

    def __post_init__(self) -> None:
        self.api = FakeAPI(self)
        self.containers = FakeContainers(self)
        self.image_store = FakeImages(self)

    def version(self) -> dict[str, str]:
        self.version_calls += 1
        return self.version_info

    def info(self) -> dict[str, Any]:
        return self.info_answer


def sdk(monkeypatch: pytest.MonkeyPatch, client: FakeClient | Exception) -> None:
    def from_env(**kwargs: Any) -> Any:
        if isinstance(client, Exception):
            raise client
        return SimpleNamespace(
            ping=client.ping,
            version=client.version,
            info=client.info,
            images=client.image_store,
            containers=client.containers,
            api=client.api,
        )

    monkeypatch.setattr(docker, "from_env", from_env)
    monkeypatch.setattr(builder.engine.probe, "find_build_client", lambda: ("/usr/bin/docker", False))


NO_SOCKET = docker.errors.DockerException(
    "Error while fetching server API version: ('Connection aborted.', "
    "FileNotFoundError(2, 'No such file or directory'))"
)
NO_PERMISSION = docker.errors.DockerException(
    "Error while fetching server API version: ('Connection aborted.', PermissionError(13, 'Permission denied'))"
)
REFUSED = docker.errors.DockerException(
    "Error while fetching server API version: HTTPConnectionPool(host='10.0.0.5', port=2375): Max retries "
    "exceeded (Caused by NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))"
)


@pytest.mark.parametrize(
    ("error", "docker_host", "message"),
    [
        (
            NO_SOCKET,
            None,
            "no Docker engine answers at unix:///var/run/docker.sock: start dockerd (or Docker Desktop), "
            "or set DOCKER_HOST",
        ),
        (
            REFUSED,
            "tcp://10.0.0.5:2375",
            "no Docker engine answers at tcp://10.0.0.5:2375: start dockerd (or Docker Desktop), or set DOCKER_HOST",
        ),
        (
            NO_PERMISSION,
            None,
            "no permission on the Docker socket /var/run/docker.sock: add your user to the docker group "
            "(then log in again) or run as root",
        ),
        (
            docker.errors.DockerException("Error while fetching server API version: TLS handshake failed"),
            "tcp://10.0.0.5:2376",
            "cannot reach the Docker engine at tcp://10.0.0.5:2376: Error while fetching server API version: "
            "TLS handshake failed",
        ),
    ],
)
def test_connection_errors_become_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, error: Exception, docker_host: str | None, message: str
) -> None:
    if docker_host is None:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
    else:
        monkeypatch.setenv("DOCKER_HOST", docker_host)
    sdk(monkeypatch, error)
    with pytest.raises(EngineError) as raised:
        DockerEngine().info()
    assert str(raised.value) == message
    assert raised.value.exit_code == 3


def test_too_old_an_engine_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk(monkeypatch, FakeClient(version_info={"Version": "18.06.3-ce", "ApiVersion": "1.38"}))
    with pytest.raises(EngineError) as raised:
        DockerEngine().info()
    assert str(raised.value) == (
        "Docker engine 18.06.3-ce (API 1.38) is too old: BuildKit secrets and cache mounts need API >= 1.39 "
        "(Docker 18.09)"
    )


def test_the_engine_check_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient()
    sdk(monkeypatch, client)
    engine = DockerEngine()
    assert engine.info() == INFO_CLASSIC
    assert engine.info() == INFO_CLASSIC
    assert client.version_calls == 1


# --- builds through the docker CLI -------------------------------------------------------------------------------


@dataclass
class Recorder:
    returncode: int = 0
    lines: tuple[str, ...] = ("#5 [runtime 1/3] FROM debian:bookworm-slim", "#5 DONE 0.0s")
    raise_: BaseException | None = None
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        on_line: Callable[[str], None] | None = None,
        keep: int = 40,
    ) -> Completed:
        self.argv, self.env = list(argv), dict(env or {})
        if self.raise_ is not None:
            raise self.raise_
        for line in self.lines:
            assert on_line is not None
            on_line(line)
        [iidfile] = [a.removeprefix("--iidfile=") for a in argv if a.startswith("--iidfile=")]
        if self.returncode == 0:
            Path(iidfile).write_text("sha256:" + "e" * 64 + "\n")
        return Completed(tuple(argv), self.returncode, self.lines)


def engine_with(monkeypatch: pytest.MonkeyPatch, recorder: Recorder, info: EngineInfo = INFO_CLASSIC) -> DockerEngine:
    monkeypatch.setattr(builder.engine.images, "run_command", recorder)
    engine = DockerEngine()
    monkeypatch.setattr(engine, "info", lambda: info)
    monkeypatch.setattr(engine, "gone", lambda during: None)  # the engine still answers: no real one asked
    return engine


CLASSIC = BuildRequest(context=Path("/ctx"), dockerfile=Path("/ctx/Dockerfile"), target="runtime")
CLASSIC_ARGV = ["docker", "build", "--progress=plain", "--target", "runtime", "-f", "/ctx/Dockerfile", "/ctx"]
BUILDX = BuildRequest(context=Path("/c"), dockerfile=Path("/c/Dockerfile"), target="devel")


def test_build_runs_the_found_client_with_an_iidfile_before_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    lines: list[str] = []
    image = engine_with(monkeypatch, recorder).build(CLASSIC, lines.append)
    assert image == "sha256:" + "e" * 64
    iid = recorder.argv[-2]
    assert iid.startswith("--iidfile=") and iid.endswith("/iid")
    assert recorder.argv == ["/usr/bin/docker", *CLASSIC_ARGV[1:-1], iid, "/ctx"]
    assert recorder.env["DOCKER_BUILDKIT"] == "1"
    assert lines == list(recorder.lines)
    assert not Path(iid.removeprefix("--iidfile=")).exists()  # its temporary directory is gone


def test_a_request_becomes_one_argv_with_every_part_in_its_place() -> None:
    request = BuildRequest(
        context=Path("/ctx"),
        dockerfile=Path("/ctx/Dockerfile"),
        target="devel",
        build_args=(("APT_MIRROR", "http://m"),),
        secrets=(("cacert", "/etc/ca.pem"),),
        labels=(("b", "2"), ("a", "1")),
        tags=("r:t",),
        platform="linux/arm64",
    )
    assert build_command(request) == [
        "docker", "build", "--progress=plain", "--target", "devel", "-f", "/ctx/Dockerfile", "--platform",
        "linux/arm64", "--build-arg", "APT_MIRROR=http://m", "--secret", "id=cacert,src=/etc/ca.pem",
        "--label", "a=1", "--label", "b=2", "-t", "r:t", "/ctx",
    ]  # fmt: skip


def test_buildx_argv_keeps_buildx_build_load(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    info = EngineInfo("28.1.1", "1.49", "/usr/local/bin/docker", True)
    engine_with(monkeypatch, recorder, info).build(BUILDX, lambda line: None)
    assert recorder.argv[:5] == ["/usr/local/bin/docker", "buildx", "build", "--load", "--provenance=false"]
    assert recorder.argv[-1] == "/c" and recorder.argv[-3].startswith("--iidfile=")
    assert recorder.argv[-2].startswith("--metadata-file=")


def test_a_failed_build_names_the_failing_step_and_its_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step's header came long before its error (tests/unit/test_build_failure.py has the recorded logs)."""
    recorder = Recorder(
        returncode=1,
        lines=(
            "#7 [runtime 3/5] RUN pip install torch",
            *(f"#7 1.{i:03} Collecting package-{i}" for i in range(60)),
            "#7 9.100 ERROR: No matching distribution found for torch==9.9",
            '#7 ERROR: process "/bin/sh -c pip install torch" did not complete successfully: exit code: 1',
            "------",
        ),
    )
    with pytest.raises(BuildError) as raised:
        engine_with(monkeypatch, recorder).build(CLASSIC, lambda line: None)
    assert str(raised.value).startswith(
        "build step [runtime 3/5] RUN pip install torch failed (exit code 1): no version of torch==9.9 on the package "
        "index; check the name and version"
    )
    assert str(raised.value).endswith('Last output: "ERROR: No matching distribution found for torch==9.9"')
    assert raised.value.exit_code == 4


def test_ctrl_c_during_a_build_is_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(raise_=Interrupted("interrupted while running /usr/bin/docker build"))
    with pytest.raises(Interrupted) as raised:
        engine_with(monkeypatch, recorder).build(CLASSIC, lambda line: None)
    assert raised.value.exit_code == 130


# --- run_command: streaming and Ctrl-C ----------------------------------------------------------------------------


class FakeStdout:
    def __init__(self, lines: Sequence[str], interrupt_after: int | None) -> None:
        self.lines, self.interrupt_after = lines, interrupt_after

    def __iter__(self) -> Iterator[str]:
        for i, line in enumerate(self.lines):
            if i == self.interrupt_after:
                raise KeyboardInterrupt
            yield line


@dataclass(eq=False)  # hashable by identity, as run_command may keep the Popen in a set
class FakePopen:
    """subprocess.Popen as run_command uses it; `ignores` signals the child shrugs off."""

    lines: Sequence[str] = ()
    code: int = 0
    interrupt_after: int | None = None
    ignores: tuple[int, ...] = ()
    pid: int = 4242
    argv: list[str] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    signals: list[int] = field(default_factory=list)

    def __call__(self, argv: list[str], **kwargs: Any) -> FakePopen:
        self.argv, self.kwargs = argv, kwargs
        self.stdout = FakeStdout(self.lines, self.interrupt_after)
        return self

    def wait(self, timeout: float | None = None) -> int:
        if self.signals and self.signals[-1] in self.ignores:
            raise subprocess.TimeoutExpired(self.argv, timeout or 0)
        return self.code

    def killpg(self, pid: int, sig: int) -> None:
        assert pid == self.pid
        self.signals.append(sig)


@pytest.fixture
def popen(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakePopen]:
    def make(**kwargs: Any) -> FakePopen:
        fake = FakePopen(**kwargs)
        monkeypatch.setattr("builder.core.process.subprocess.Popen", fake)
        monkeypatch.setattr("builder.core.process.os.killpg", fake.killpg)
        return fake

    return make


def test_run_command_streams_lines_and_keeps_a_tail(popen: Callable[..., FakePopen]) -> None:
    fake = popen(lines=[f"line {i}\n" for i in range(5)], code=3)
    seen: list[str] = []
    done = run_command(["docker", "build", "/ctx"], env={"DOCKER_BUILDKIT": "1"}, on_line=seen.append, keep=2)
    assert seen == [f"line {i}" for i in range(5)]
    assert done == Completed(("docker", "build", "/ctx"), 3, ("line 3", "line 4"))
    assert fake.argv == ["docker", "build", "/ctx"]
    assert fake.kwargs["env"] == {"DOCKER_BUILDKIT": "1"}
    assert fake.kwargs["stderr"] == subprocess.STDOUT
    assert fake.kwargs["start_new_session"] is True  # Ctrl-C reaches torchyard, which stops the group
    assert "shell" not in fake.kwargs


def test_ctrl_c_stops_the_process_group_and_raises_interrupted(popen: Callable[..., FakePopen]) -> None:
    fake = popen(lines=["#1 building\n", "#2 more\n"], interrupt_after=1)
    with pytest.raises(Interrupted) as raised:
        run_command(["/usr/bin/docker", "build", "/ctx"])
    assert str(raised.value) == "interrupted while running /usr/bin/docker build"
    assert raised.value.exit_code == 130
    assert fake.signals == [signal.SIGINT]


def test_a_child_that_ignores_sigint_is_terminated_then_killed(popen: Callable[..., FakePopen]) -> None:
    fake = popen(lines=["x\n"], interrupt_after=0, ignores=(signal.SIGINT, signal.SIGTERM))
    with pytest.raises(Interrupted):
        run_command(["docker", "build", "/ctx"])
    assert fake.signals == [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


def test_a_child_already_gone_is_fine(popen: Callable[..., FakePopen], monkeypatch: pytest.MonkeyPatch) -> None:
    popen(lines=["x\n"], interrupt_after=0)

    def gone(pid: int, sig: int) -> None:
        raise ProcessLookupError

    monkeypatch.setattr("builder.core.process.os.killpg", gone)
    with pytest.raises(Interrupted):
        run_command(["docker"])


# --- containers, tags and pushes through the SDK ---------------------------------------------------------------------


def test_run_removes_its_container_and_returns_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(container=FakeContainer(exit_code=1, logs_text="1 failed\n"))
    sdk(monkeypatch, client)
    mounts = (Mount("/tmp/out", "/torchyard-out", read_only=False), Mount("/src/smoke", "/opt/smoke"))
    result = DockerEngine().run("img", ["python", "-c", "pass"], mounts=mounts, gpus="all", user="1000")
    assert (result.exit_code, result.output, result.timed_out) == (1, "1 failed\n", False)
    assert client.container.removed
    [(image, command, kwargs)] = client.started
    assert (image, command) == ("img", ["python", "-c", "pass"])
    assert kwargs["volumes"] == {
        "/tmp/out": {"bind": "/torchyard-out", "mode": "rw"},
        "/src/smoke": {"bind": "/opt/smoke", "mode": "ro"},
    }
    assert (kwargs["network_mode"], kwargs["user"]) == ("none", "1000")
    [request] = kwargs["device_requests"]
    assert (request["Count"], request["Capabilities"]) == (-1, [["gpu"]])


@pytest.mark.parametrize(("gpus", "count"), [("2", 2), ("none", None), (None, None)])
def test_gpus_become_a_device_request(monkeypatch: pytest.MonkeyPatch, gpus: str | None, count: int | None) -> None:
    client = FakeClient()
    sdk(monkeypatch, client)
    DockerEngine().run("img", ["true"], gpus=gpus)
    kwargs = client.started[0][2]
    assert [r["Count"] for r in kwargs.get("device_requests", [])] == ([] if count is None else [count])


def test_a_timed_out_container_is_killed_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(container=FakeContainer(status="running"))
    sdk(monkeypatch, client)
    result = DockerEngine().run("img", ["sleep", "infinity"], timeout=0)
    assert (result.exit_code, result.timed_out) == (-1, True)
    assert client.container.killed and client.container.removed


def test_ctrl_c_while_a_container_runs_still_removes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(container=FakeContainer(fail_reload=KeyboardInterrupt()))
    sdk(monkeypatch, client)
    with pytest.raises(KeyboardInterrupt):
        DockerEngine().run("img", ["python"])
    assert client.container.removed


def test_a_container_that_cannot_be_created_is_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(create_error=docker.errors.ImageNotFound("No such image: img:nope"))
    sdk(monkeypatch, client)
    with pytest.raises(EngineError, match=r"^could not create a container from img:nope: No such image: img:nope$"):
        DockerEngine().run("img:nope", ["python"])


def test_a_container_that_cannot_start_is_removed_and_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(start_error=docker.errors.APIError("400 Client Error: Bad Request (cgroup trouble)"))
    sdk(monkeypatch, client)
    with pytest.raises(EngineError, match=r"^could not start a container from img:1: 400 Client Error"):
        DockerEngine().run("img:1", ["python"])
    assert client.container.removed  # created, not started: still removed


def test_a_missing_executable_is_exit_127_and_the_container_is_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    error = 'OCI runtime create failed: exec: "python": executable file not found in $PATH'
    client = FakeClient(start_error=docker.errors.APIError(error))
    sdk(monkeypatch, client)
    result = DockerEngine().run("img:1", ["python"])
    assert result.exit_code == 127 and "executable file not found" in result.output
    assert client.container.removed


def test_inspect_of_a_missing_image_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    sdk(monkeypatch, FakeClient())
    assert DockerEngine().inspect("127.0.0.1:5000/team/torch:nope") is None


def test_inspect_reads_labels_env_and_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    attrs = {"Config": {"Labels": {"a": "b"}, "Env": ["PATH=/opt/venv/bin"]}, "RepoDigests": ["r@sha256:1"], "Size": 7}
    image = SimpleNamespace(id="sha256:1", tags=["r:t"], attrs=attrs)
    sdk(monkeypatch, FakeClient(images={"r:t": image}))
    found = DockerEngine().inspect("r:t")
    assert found is not None
    assert (found.id, found.labels, found.tags, found.digests, found.size, found.env) == (
        "sha256:1",
        {"a": "b"},
        ("r:t",),
        ("r@sha256:1",),
        7,
        ("PATH=/opt/venv/bin",),
    )


def test_tag_splits_the_ref_and_a_refused_tag_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    tagged: list[tuple[str, str]] = []

    def tag(repo: str, tag: str) -> bool:
        tagged.append((repo, tag))
        return repo != "bad"

    sdk(monkeypatch, FakeClient(images={"sha256:1": SimpleNamespace(tag=tag)}))
    engine = DockerEngine()
    engine.tag("sha256:1", "127.0.0.1:5000/team/torch:2.14-cuda13.0-runtime")
    assert tagged == [("127.0.0.1:5000/team/torch", "2.14-cuda13.0-runtime")]
    with pytest.raises(EngineError, match=r"could not tag sha256:1 as bad:x"):
        engine.tag("sha256:1", "bad:x")


def test_push_passes_the_credentials_and_returns_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [{"status": "Preparing", "id": "abc"}, {"status": "latest: digest: sha256:9 size: 1"}]
    client = FakeClient(push_events=[*events, {"aux": {"Digest": "sha256:9"}}])
    sdk(monkeypatch, client)
    lines: list[str] = []
    digest = DockerEngine().push("127.0.0.1:5001/team/torch:t", RegistryAuth("ci", "pw"), lines.append)
    assert digest == "sha256:9"
    [(repo, kwargs)] = client.pushes
    assert (repo, kwargs["tag"], kwargs["auth_config"]) == (
        "127.0.0.1:5001/team/torch",
        "t",
        {"username": "ci", "password": "pw"},
    )
    assert lines == ["latest: digest: sha256:9 size: 1"]  # layer progress (with an id) is not echoed


def test_registry_credentials_never_show_in_a_repr() -> None:
    assert "pw-secret" not in repr(RegistryAuth("ci", "pw-secret"))


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            [{"status": "Preparing", "id": "a"}, {"error": "denied: requested access to the resource is denied\n"}],
            "push r:t: denied: requested access to the resource is denied",
        ),
        ([{"status": "Pushed", "id": "a"}], "push r:t: the registry returned no digest"),
    ],
)
def test_a_rejected_push_is_a_push_error(
    monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]], message: str
) -> None:
    sdk(monkeypatch, FakeClient(push_events=events))
    with pytest.raises(PushError) as raised:
        DockerEngine().push("r:t", None, lambda line: None)
    assert str(raised.value) == message
    assert raised.value.exit_code == 5


def test_ctrl_c_during_a_push_is_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient()
    sdk(monkeypatch, client)

    def interrupted(repo: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"status": "Preparing", "id": "a"}
        raise KeyboardInterrupt

    monkeypatch.setattr(client.api, "push", interrupted)
    with pytest.raises(Interrupted, match=r"^interrupted while pushing r:t$"):
        DockerEngine().push("r:t", None, lambda line: None)


# --- the engine going away mid-run (issue 24) -------------------------------------------------------------------

ABORTED = requests.ConnectionError(("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")))


def test_an_engine_gone_during_a_run_is_an_engine_error_not_requests_raw_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/gone.sock")
    client = FakeClient(container=FakeContainer(status="running", fail_reload=ABORTED), pings_before_gone=1)
    sdk(monkeypatch, client)
    with pytest.raises(EngineError) as gone:
        DockerEngine().run("img:1", ["python"])
    assert str(gone.value) == (
        "the Docker engine at unix:///tmp/gone.sock went away during the run of img:1: start it, then run again"
    )
    assert gone.value.exit_code == 3


def test_a_failed_call_on_an_engine_that_still_answers_keeps_its_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(container=FakeContainer(status="running", fail_reload=ABORTED))
    sdk(monkeypatch, client)
    with pytest.raises(requests.ConnectionError):
        DockerEngine().run("img:1", ["python"])
    assert client.container.removed


def test_an_engine_gone_during_a_push_is_not_blamed_on_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_stream() -> Iterator[dict[str, Any]]:
        yield {"status": "Preparing"}
        raise ABORTED

    for answers, error in ((None, PushError), (1, EngineError)):
        client = FakeClient(pings_before_gone=answers)
        monkeypatch.setattr(FakeAPI, "push", lambda self, repo, **kwargs: broken_stream())
        sdk(monkeypatch, client)
        with pytest.raises(error) as raised:
            DockerEngine().push("127.0.0.1:5000/t/x:1", None, lambda line: None)
        assert ("went away during the push of 127.0.0.1:5000/t/x:1" in str(raised.value)) is (error is EngineError)


def test_a_registry_s_unparsed_refusal_of_a_push_is_one_clean_line(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(push_events=[{"error": "error parsing HTTP 405 response body: invalid character 'M'"}])
    sdk(monkeypatch, client)
    with pytest.raises(PushError, match=r"^push r:1: the registry refused it: HTTP 405, method not allowed: "):
        DockerEngine().push("r:1", None, lambda line: None)


def _leftover(owner: str) -> FakeContainer:
    container = FakeContainer()
    container.labels = {"io.torchyard.run-by": owner}  # type: ignore[attr-defined]
    return container


def test_a_run_removes_the_exited_containers_of_torchyard_processes_that_are_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    host = socket.gethostname()
    dead = (1 << 22) + 1  # above Linux's largest pid_max: no process has it
    leftovers = [_leftover(f"{host}:{dead}"), _leftover(f"{host}:{os.getpid()}"), _leftover(f"other:{dead}")]
    client = FakeClient(leftovers=leftovers)
    sdk(monkeypatch, client)
    DockerEngine().run("img:1", ["python"])
    assert [c.removed for c in leftovers] == [True, False, False]  # a live process's and another host's stay
    [(_, _, kwargs)] = client.started
    assert kwargs["labels"] == {"io.torchyard.run-by": f"{host}:{os.getpid()}"}


# --- the containerd image store ------------------------------------------------------------------------------


def test_the_image_store_is_read_from_docker_info(monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient(info_answer={"DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]})
    sdk(monkeypatch, client)
    info = DockerEngine().info()
    assert (info.containerd_store, info.image_store) == (True, "containerd")
    assert (INFO_CLASSIC.containerd_store, INFO_CLASSIC.image_store) == (False, "graph driver")


def test_in_containerd_s_store_a_built_image_is_known_by_its_manifest_digest(tmp_path: Path) -> None:
    iid, metadata = tmp_path / "iid", tmp_path / "metadata.json"
    iid.write_text("sha256:" + "c" * 64 + "\n")
    metadata.write_text(json.dumps({"containerimage.config.digest": "sha256:" + "c" * 64,
                                    "containerimage.digest": "sha256:" + "m" * 64}))  # fmt: skip
    assert built_id(iid, metadata, containerd=True) == "sha256:" + "m" * 64
    assert built_id(iid, metadata, containerd=False) == "sha256:" + "c" * 64
    assert built_id(iid, tmp_path / "none.json", containerd=True) == "sha256:" + "c" * 64


def test_a_push_through_containerd_s_store_names_its_digest_in_the_status_line(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = "sha256:" + "e" * 64
    client = FakeClient(push_events=[{"status": "The push refers to repository [r/x]"},
                                     {"status": "Mounted from other", "progressDetail": {}, "id": "b03bfd502895"},
                                     {"status": f"t1: digest: {digest} size: 406"}])  # fmt: skip
    sdk(monkeypatch, client)
    assert DockerEngine().push("r/x:t1", None, lambda line: None) == digest


def test_a_refusal_in_containerd_s_words_is_the_registry_s_refusal() -> None:
    said = (
        "unexpected status from POST request to http://127.0.0.1:45581/v2/team/ro/blobs/uploads/?mount=sha256:29"
        "&from=base: 405 Method Not Allowed"
    )
    assert (
        push_refusal(said)
        == "the registry refused it: HTTP 405, method not allowed: the registry is read-only (or takes no pushes here)"
    )


def test_a_step_left_running_by_an_interrupted_build_is_built_again_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """BuildKit joins a step still running for a client that is gone (its secrets gone with its session): the build
    fails with "no active sessions". It is built again once, after a pause; a second such failure is the error."""
    orphaned = ("#9 [venv 18/18] RUN apt-get update", "#9 ERROR: no active sessions", "ERROR: failed to solve")
    runs = [Recorder(returncode=1, lines=orphaned), Recorder()]
    waited: list[float] = []

    def run(argv: Sequence[str], **kwargs: Any) -> Completed:
        return runs.pop(0)(argv, **kwargs)

    engine = engine_with(monkeypatch, Recorder())
    monkeypatch.setattr(builder.engine.images, "run_command", run)
    monkeypatch.setattr("builder.engine.images.time.sleep", waited.append)
    lines: list[str] = []
    assert engine.build(CLASSIC, lines.append) == "sha256:" + "e" * 64
    assert waited == [builder.engine.images.ORPHAN_WAIT] and runs == []
    assert "torchyard: no active sessions: a step was still running for an interrupted build; building again" in lines
    runs[:] = [Recorder(returncode=1, lines=orphaned), Recorder(returncode=1, lines=orphaned)]
    with pytest.raises(BuildError):
        engine.build(CLASSIC, lines.append)
    assert runs == []
