"""Containers the user drives: `torchyard run` and `doctor --check` start one through the docker CLI (its terminal
handling, signal proxy and exit codes are what users know from `docker run`), in one subprocess call here.

Every such container is named and started with --rm; when torchyard is interrupted (Ctrl-C, SIGINT) or a
timeout passes, the container is removed by name before torchyard exits, so none is left behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from builder.core import env
from builder.core.errors import EngineError, Interrupted

WORKSPACE = "/workspace"
HOME = "/tmp"  # a writable HOME for any --user: /tmp is world-writable (1777) in every base image


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    """One `docker run`: what it starts and with which access; no command-line syntax in it."""

    image: str
    command: tuple[str, ...] = ()  # empty: the image's own CMD
    name: str
    gpu_flags: tuple[str, ...] = ()  # ("--gpus", "all") or ("--device", "nvidia.com/gpu=all"); none: CPU only
    shm_size: str | None = None  # None: --ipc=host (the host's /dev/shm, what DataLoader workers and NCCL want)
    workspace: str | None = None  # a host folder mounted at /workspace, the working directory
    user: str | None = None  # UID:GID; None: the image's user (root in most)
    env: tuple[str, ...] = ()  # NAME=VALUE, or NAME to pass the caller's value
    files: tuple[tuple[str, str], ...] = ()  # (host file, container path), mounted read-only (the user's passwd)
    tty: bool = False  # -t: stdin is a terminal
    interactive: bool = True  # -i: the container reads the caller's stdin
    extra: tuple[str, ...] = ()  # more `docker run` options, as the user gave them
    workdir: str = WORKSPACE  # where `workspace` is mounted (the notebook's /home/jovyan/work)
    home: str = HOME  # HOME with --user
    detach: bool = False  # -d: started in the background (run --notebook); never -i or -t then
    remove: bool = True  # --rm; a detached notebook is removed by torchyard, so its logs outlive a crash


@dataclass(frozen=True)
class Exited:
    code: int  # the container's exit code (docker run's own 125-127 when it could not start it)
    output: str = ""  # only when captured
    timed_out: bool = False


def container_name(prefix: str = "torchyard-run") -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


def docker_run_argv(spec: ContainerSpec, client: str = "docker") -> list[str]:
    """The docker CLI argv that starts `spec` (what --dry-run prints)."""
    argv = [client, "run", *["--rm"] * spec.remove, "--name", spec.name]
    if spec.detach:
        argv += ["-d"]
    else:
        argv += ["-it"] if spec.tty and spec.interactive else ["-i"] if spec.interactive else []
    argv += list(spec.gpu_flags)
    argv += [f"--shm-size={spec.shm_size}"] if spec.shm_size else ["--ipc=host"]
    if spec.workspace is not None:
        argv += ["-v", f"{spec.workspace}:{spec.workdir}", "-w", spec.workdir]
    if spec.user is not None:
        argv += ["--user", spec.user, "-e", f"HOME={spec.home}"]
    for source, target in spec.files:
        argv += ["-v", f"{source}:{target}:ro"]
    for item in spec.env:
        argv += ["-e", item]
    return [*argv, *spec.extra, spec.image, *spec.command]


def find_cli() -> str:
    """The docker CLI: $TORCHYARD_DOCKER, else the first `docker` on PATH or in the usual places (any version
    runs containers; only builds need BuildKit)."""
    candidates = [os.environ[env.DOCKER]] if os.environ.get(env.DOCKER) else []
    candidates += [p for p in (shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker") if p]
    for path in candidates:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return path
    raise EngineError("no docker CLI found (run starts containers with it): install docker.io or docker-ce-cli")


def run_container(spec: ContainerSpec, *, capture: bool = False, timeout: float | None = None) -> Exited:
    """Start `spec` in the foreground (the caller's terminal, or its output captured) and wait for it.

    Interrupted (Ctrl-C) or past `timeout`: the container is removed by name, then the CLI is waited for."""
    client = find_cli()
    argv = docker_run_argv(spec, client)
    out = subprocess.PIPE if capture else None
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT if capture else None, text=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _remove(client, spec.name, proc)
        output, _ = proc.communicate()
        return Exited(-1, output or "", timed_out=True)
    except KeyboardInterrupt:
        _remove(client, spec.name, proc)
        raise Interrupted(f"interrupted: container {spec.name} removed") from None
    return Exited(proc.returncode, output or "")


def _remove(client: str, name: str, proc: subprocess.Popen[str]) -> None:
    """Remove the container by name, wait for the CLI (it ends when its container does), and remove again in
    case the CLI was still creating it when the first removal ran."""
    _force_remove(client, name)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _force_remove(client, name)


def _force_remove(client: str, name: str) -> None:
    with suppress(OSError, subprocess.SubprocessError):
        subprocess.run([client, "rm", "-f", name], capture_output=True, timeout=60, check=False)
