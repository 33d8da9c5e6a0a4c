"""Issue 24 faults against real engines and registries: a Docker engine that goes away mid-run (a dockerd of this
module's own, on its own socket and data root, which the tests kill: never the shared engine), a read-only
registry, a full output disk. Each is one line with the README's exit code, and leaves nothing behind.

A registry port that accepts connections and never answers holds a build (its base image's metadata) and a push
in flight for as long as a test needs, so the engine is killed while they run, not before or after."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import RUN_ID
from kit import REGISTRY, docker, one_line_error, torchyard

from builder.core.errors import EngineError, PushError

pytestmark = pytest.mark.docker
DOCKER = "/usr/bin/docker"
SLEEPY = "torchyard-faults/sleepy:1"  # `python` sleeps: the smoke suite is running when the engine is killed
BRIDGE = "tyfault0"  # the own engine's bridge (see OwnEngine)
QUICK = "torchyard-faults/quick:1"  # `python` exits 3 at once


@dataclass
class OwnEngine:
    """A dockerd of the test's own: a bridge of its own, no iptables (containers run with --network none).
    Not `--bridge none`: a dockerd started so deletes the host's docker0, and the shared engine's containers
    lose their network (every later build's RUN step that reaches PyPI fails)."""

    folder: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def host(self) -> str:
        return f"unix://{self.folder}/d.sock"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host, "DOCKER_BUILDKIT": "1"}

    @property
    def exec_root(self) -> str:
        return f"{self.folder}/exec{self.starts}"

    def start(self) -> None:
        """Each start with an exec root (containerd's state) of its own: the data root keeps the images and the
        containers' records; the containerd of a killed dockerd died with it, and a new one would wait on the
        old one's shims."""
        (self.folder / "pid").unlink(missing_ok=True)  # a killed dockerd leaves its pid file
        self.starts += 1
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", "10.254.253.1/24", "dev", BRIDGE], check=True)
        argv = ["dockerd", "--data-root", f"{self.folder}/root", "--exec-root", self.exec_root]
        argv += ["--pidfile", f"{self.folder}/pid", "--host", self.host, "--bridge", BRIDGE]
        argv += ["--iptables=false", "--ip6tables=false", "--ip-masq=false"]
        with (self.folder / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        for _ in range(120):
            if self.docker("info").returncode == 0:
                return
            time.sleep(0.25)
        raise AssertionError(f"own dockerd did not start: {(self.folder / 'dockerd.log').read_text()[-800:]}")

    def running(self) -> OwnEngine:
        """Up for the next test, also after a test that failed with it killed."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()  # SIGKILL: the engine is lost, not shut down
        self.proc.wait(timeout=30)
        _kill_processes_under(self.exec_root)  # the shims and the containers it could not stop

    def clean(self) -> None:
        _kill_processes_under(str(self.folder))
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{self.folder}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def docker(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [DOCKER, *args], env=self.env(), capture_output=True, text=stdin is None, input=stdin, check=False
        )

    def containers(self) -> list[str]:
        return self.docker("ps", "-a", "--format", "{{.Image}} {{.Status}}").stdout.splitlines()


def _kill_processes_under(path: str) -> None:
    """The processes this module's engine started (their command line names its folder), with their children."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(path.encode() in arg for arg in argv):
            children = subprocess.run(["pgrep", "-P", entry.name], capture_output=True, text=True, check=False)
            for pid in [*children.stdout.split(), entry.name]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def _image(engine: OwnEngine, tag: str, script: str, folder: Path) -> None:
    (folder / "python").write_text(f"#!/bin/sh\n{script}\n")
    dockerfile = "FROM debian:bookworm-slim\nCOPY --chmod=755 python /usr/local/bin/python\n"
    (folder / "Dockerfile").write_text(dockerfile)
    built = engine.docker("build", "-q", "-t", tag, str(folder))
    assert built.returncode == 0, built.stderr


@pytest.fixture(scope="module")
def engine() -> Iterator[OwnEngine]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("needs root and dockerd to start an engine of its own")
    own = OwnEngine(Path(tempfile.mkdtemp(prefix="ty-eng-", dir="/tmp")))  # a short path: a socket's is limited
    shared_bridge = Path("/sys/class/net/docker0").exists()
    try:
        own.start()
        saved = subprocess.run([DOCKER, "save", "debian:bookworm-slim"], capture_output=True, check=True).stdout
        loaded = own.docker("load", "-q", stdin=saved)
        assert loaded.returncode == 0, loaded.stderr
        for tag, script, name in ((SLEEPY, "exec sleep 300", "sleepy"), (QUICK, "exit 3", "quick")):
            (own.folder / name).mkdir()
            _image(own, tag, script, own.folder / name)
        yield own
    finally:
        own.stop()
        own.clean()
        assert Path("/sys/class/net/docker0").exists() or not shared_bridge, "the own engine took docker0 away"


@pytest.fixture(scope="module")
def silent_registry() -> Iterator[str]:
    """host:port of a server that accepts connections and never answers (held open until the module ends)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for conn in held:
        conn.close()


def _background(engine: OwnEngine, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "builder", *args]
    env = {**engine.env(), "TORCHYARD_ANY_HOST": "1"}
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(found: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _errors(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip() and line.startswith("torchyard: error")]
    assert "Traceback" not in out + err, err[-2000:]
    assert len(lines) == 1, err
    return proc.returncode, lines[0]


def test_the_engine_lost_during_the_smoke_suite_is_exit_3_and_its_container_is_removed_later(
    engine: OwnEngine,
) -> None:
    proc = _background(engine.running(), "smoke", SLEEPY)
    _wait_for(lambda: any("Up" in line for line in engine.containers()), "the smoke container to run")
    engine.kill()
    code, line = _errors(proc)
    assert (code, line) == (
        3,
        f"torchyard: error: the Docker engine at {engine.host} went away during the run of {SLEEPY}: "
        "start it, then run again",
    )
    engine.start()  # it comes back with the container stopped: the next run removes it (its process is gone)
    assert [line.split()[0] for line in engine.containers()] == [SLEEPY]
    again = torchyard("smoke", QUICK, env={"DOCKER_HOST": engine.host})
    assert again.code == 4  # QUICK's `python` exits 3: no report
    assert engine.containers() == []


def test_the_engine_lost_during_a_build_step_is_exit_3_not_a_failed_build(
    engine: OwnEngine, silent_registry: str, tmp_path: Path
) -> None:
    engine.running()
    out = tmp_path / "ctx"
    flags = ("--torch", "2.5.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12")
    proc = _background(engine, "build", *flags, "--registry-mirror", f"{silent_registry}/hub", "-o", str(out))
    # the build asks the silent mirror for its base image's metadata: it is in a build step until killed
    _wait_for(lambda: "load metadata" in _text(out / "build-runtime.log"), "the build to reach its base image")
    engine.kill()
    code, line = _errors(proc)
    assert (code, line) == (
        3,
        f"torchyard: error: the Docker engine at {engine.host} went away during the build of runtime: "
        "start it, then run again",
    )


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_the_engine_lost_during_a_push_is_exit_3_not_the_registry_s_fault(
    engine: OwnEngine, silent_registry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builder.engine import DockerEngine

    ref = f"{silent_registry}/torchyard-faults/push:{RUN_ID}"
    assert engine.running().docker("tag", QUICK, ref).returncode == 0
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    raised: list[BaseException] = []

    def push() -> None:
        try:
            DockerEngine().push(ref, None, lambda line: None)
        except BaseException as exc:
            raised.append(exc)

    pushing = threading.Thread(target=push)
    pushing.start()
    time.sleep(2)  # the engine is waiting for the silent registry's answer
    assert pushing.is_alive() and raised == []
    engine.kill()
    pushing.join(timeout=60)
    [error] = raised
    assert isinstance(error, EngineError) and error.exit_code == 3
    assert str(error) == (
        f"the Docker engine at {engine.host} went away during the push of {ref}: start it, then run again"
    )


# --- a read-only registry -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def readonly_registry() -> Iterator[str]:
    registry = shutil.which("docker-registry") or shutil.which("registry")
    if registry is None:
        pytest.skip("needs the distribution registry (docker-registry)")
    folder = Path(tempfile.mkdtemp(prefix="ty-ro-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {folder}/data\n  maintenance:\n    readonly:\n      enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen([registry, "serve", str(folder / "config.yml")], stdout=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _answers(port), "the read-only registry", timeout=30)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def _answers(port: int) -> bool:
    with socket.socket() as conn:
        return conn.connect_ex(("127.0.0.1", port)) == 0


def test_a_read_only_registry_s_refusal_of_a_push_is_one_clean_line(readonly_registry: str) -> None:
    from builder.engine import DockerEngine

    ref = f"{readonly_registry}/torchyard-faults/ro:{RUN_ID}"
    assert docker("tag", "debian:bookworm-slim", ref).returncode == 0
    try:
        with pytest.raises(PushError) as refused:
            DockerEngine().push(ref, None, lambda line: None)
    finally:
        docker("rmi", "--no-prune", ref)
    assert refused.value.exit_code == 5
    assert str(refused.value) == (
        f"push {ref}: the registry refused it: HTTP 405, method not allowed: the registry is read-only "
        "(or takes no pushes here)"
    )


def test_a_read_only_registry_refuses_a_promote_in_one_line_exit_5(readonly_registry: str) -> None:
    source = f"{REGISTRY}/torchyard-faults/src:{RUN_ID}"
    assert docker("tag", "debian:bookworm-slim", source).returncode == 0
    try:
        assert docker("push", source).returncode == 0
    finally:
        docker("rmi", "--no-prune", source)
    run = torchyard("promote", source, f"{readonly_registry}/torchyard-faults/ro:{RUN_ID}")
    assert run.code == 5
    line = one_line_error(run)
    assert "HTTP 405" in line and "error parsing" not in line


def test_a_publish_to_a_read_only_registry_is_exit_5_before_any_build(readonly_registry: str, tmp_path: Path) -> None:
    """Issue 44 item 7: the write probe finds the refusal before the first build, not after a build and a smoke
    suite; the report is written on this exit too."""
    out, report = tmp_path / "out", tmp_path / "report.json"
    repo = f"{readonly_registry}/torchyard-faults/pub"
    run = torchyard("publish", "--repo", repo, "--only", "torch2.14.0-cu130-py3.13-debian13-runtime",
                    "-o", str(out), "--report", str(report), timeout=120)  # fmt: skip
    assert run.code == 5, run.text[-2000:]
    line = one_line_error(run)
    assert f"registry {readonly_registry} will not take a push to torchyard-faults/pub (HTTP 405)" in line, line
    assert [p.name for p in out.rglob("build-*.log")] == []  # no build started
    data = json.loads(report.read_text())  # the report on this exit too
    assert [i["status"] for i in data["items"]] == ["failed"] and "HTTP 405" in data["items"][0]["reason"]


# --- a full output disk ----------------------------------------------------------------------------------------


def test_a_full_output_disk_names_the_file_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(disk)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine does not let root mount a tmpfs")
    try:
        flags = ("--torch", "2.5.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12")
        run = torchyard("render", *flags, "-o", str(disk / "out"))
        assert run.code == 2
        assert one_line_error(run) == (
            f"torchyard: error: {disk}/out/Dockerfile: cannot write: No space left on device"
        )
        assert sorted(p.name for p in (disk / "out").iterdir()) == [".torchyard.lock"]  # no half-written context
    finally:
        subprocess.run(["umount", str(disk)], check=False)
