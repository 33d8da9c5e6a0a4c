"""A container started in the background and watched (`torchyard run --notebook`): started, its state and health
read, its last log lines, its logs followed, stopped and removed. Each step is one docker CLI call (the program
`torchyard run` starts containers with, builder.engine.interactive), so what users know of `docker run -d`,
`docker logs` and `docker stop` holds.

Secrets reach the container by name only (`-e JUPYTER_TOKEN`): their values are in the CLI's environment, never on
its command line (`ps` shows it) nor in a printed line.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass

from builder.core.errors import EngineError
from builder.engine.interactive import ContainerSpec, docker_run_argv, find_cli

START_TIMEOUT = 600.0  # seconds for `docker run -d` (it pulls nothing: the image is local before it)
CALL_TIMEOUT = 30.0  # seconds for inspect, logs
STOP_GRACE = 10  # seconds `docker stop` gives the server before SIGKILL


@dataclass(frozen=True)
class State:
    """What `docker inspect` says of a container's life."""

    status: str  # created | running | restarting | exited | dead ...
    health: str | None  # starting | healthy | unhealthy; None: the image has no HEALTHCHECK
    exit_code: int = 0


class Detached:
    """The docker CLI driving one background container at a time (no state of its own)."""

    def __init__(self, client: str | None = None) -> None:
        self._client = client

    @property
    def client(self) -> str:
        if self._client is None:
            self._client = find_cli()
        return self._client

    def start(self, spec: ContainerSpec, secrets: Mapping[str, str]) -> None:
        """`docker run -d` with `secrets` in the CLI's environment; a refusal (a port already taken, no GPU
        runtime) removes what it created and raises EngineError with docker's words."""
        argv = docker_run_argv(spec, self.client)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **secrets},
                                  timeout=START_TIMEOUT, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.remove(spec.name)
            raise EngineError(f"could not start {spec.name} from {spec.image}: {exc}") from None
        if done.returncode != 0:
            self.remove(spec.name)
            said = (done.stderr or done.stdout).strip().splitlines()
            raise EngineError(f"could not start a container from {spec.image}: {said[-1] if said else 'no reason'}")

    def state(self, name: str) -> State | None:
        """None: no such container (it was removed, or never created)."""
        done = self._call("inspect", "--type", "container", "--format", "{{json .State}}", name)
        if done is None or done.returncode != 0:
            return None
        try:
            found = json.loads(done.stdout)
        except ValueError:
            return None
        health = found.get("Health") or {}
        return State(str(found.get("Status", "")), health.get("Status"), int(found.get("ExitCode") or 0))

    def logs(self, name: str, lines: int) -> str:
        done = self._call("logs", "--tail", str(lines), name)
        return "" if done is None else done.stdout + done.stderr

    def follow(self, name: str) -> None:
        """The container's new log lines on this terminal until it stops (Ctrl-C ends the follower, then raises)."""
        subprocess.run([self.client, "logs", "--follow", "--tail", "0", name], check=False)

    def stop(self, name: str) -> None:
        """`docker stop` (SIGTERM: the server shuts its kernels down), then removed."""
        self._call("stop", "--time", str(STOP_GRACE), name, timeout=STOP_GRACE + CALL_TIMEOUT)
        self.remove(name)

    def remove(self, name: str) -> None:
        self._call("rm", "--force", name)

    def _call(self, *args: str, timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess[str] | None:
        with suppress(OSError, subprocess.SubprocessError):
            return subprocess.run([self.client, *args], capture_output=True, text=True, timeout=timeout, check=False)
        return None
