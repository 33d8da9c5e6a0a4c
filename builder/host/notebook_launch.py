"""`torchyard run --notebook`: the notebook image for this machine, started in the background, waited for until
its health check passes, and its URL with the token printed.

The container is run's (the same choice of image, GPU flags, --ipc=host and the caller's UID:GID), with what the
notebook image's contract asks (docker-stacks' layout): the current folder at /home/jovyan/work, HOME
/home/jovyan (writable by group 100, `users`, which the caller joins with --group-add 100, as the venv is for
`%pip install`), the server's port published on 127.0.0.1 only (never --network host, which would drop the
publication), and a token generated here, passed by name (`-e JUPYTER_TOKEN`) with its value in the docker CLI's
environment only. The container is not started with --rm, so a server that dies while starting leaves its logs
to print; torchyard removes it on every way out but --detach.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from builder.core.errors import Interrupted, NotReadyError, UsageError
from builder.engine.detached import State
from builder.engine.interactive import ContainerSpec, container_name

PORT = 8888  # the image's JUPYTER_PORT, and run --notebook's default --port
HOME = "/home/jovyan"
WORK = "/home/jovyan/work"  # the image's WORKDIR: the current folder is mounted here
USERS_GID = "100"  # `users`: owns HOME and the venv (group-writable)
TOKEN = "JUPYTER_TOKEN"  # jupyter-server reads its token from it
READY_TIMEOUT = 60.0  # seconds for the health check to pass
POLL = 0.5
LOG_LINES = 30  # the container's last lines printed when it did not become ready
HOST_NETWORK = ("--network=host", "--net=host")

Say = Callable[[str], None]


class Containers(Protocol):
    """What a notebook needs of the engine (builder.engine.detached.Detached has it)."""

    def start(self, spec: ContainerSpec, secrets: dict[str, str]) -> None: ...
    def state(self, name: str) -> State | None: ...
    def logs(self, name: str, lines: int) -> str: ...
    def follow(self, name: str) -> None: ...
    def stop(self, name: str) -> None: ...


@dataclass(frozen=True)
class Notebook:
    name: str  # the container's
    url: str  # http://127.0.0.1:PORT[BASE]/lab?token=TOKEN


def refuse_for_notebook(docker_args: tuple[str, ...], command: tuple[str, ...]) -> None:
    """What --notebook cannot take: --network host (it drops -p), a command (the image's CMD is the server)."""
    pairs = zip(docker_args, (*docker_args[1:], "")[: len(docker_args)], strict=True)
    if any(a in HOST_NETWORK or (a in ("--network", "--net") and b == "host") for a, b in pairs):
        raise UsageError("run --notebook: --network host would drop the published port; leave it out (--port PORT)")
    if command:
        raise UsageError(f"run --notebook: the image starts the notebook server; no command ({command[0]} ...)")


def notebook_spec(spec: ContainerSpec, port: int) -> ContainerSpec:
    """run's container as the notebook's: detached, kept after it stops, the work folder, HOME, the port, the
    token by name, group 100 for the caller's UID."""
    inside = _env_value(spec, "JUPYTER_PORT") or str(PORT)
    groups = ("--group-add", USERS_GID) if spec.user is not None else ()
    # a root caller (a root shell, not sudo) owns the folder as root: the server runs as root too (start.sh keeps
    # NB_UID=0, start-notebook.sh adds --allow-root), so what it writes there belongs to the caller, as for others
    as_root = ("NB_UID=0", "NB_GID=0") if spec.user is not None and spec.user.split(":")[0] == "0" else ()
    return replace(
        spec,
        command=(),
        name=container_name("torchyard-notebook"),
        workdir=WORK,
        home=HOME,
        env=(*spec.env, *as_root, TOKEN),
        tty=False,
        interactive=False,
        detach=True,
        remove=False,
        extra=("-p", f"127.0.0.1:{port}:{inside}", *groups, *spec.extra),
    )


def notebook_url(spec: ContainerSpec, port: int, token: str) -> str:
    base = (_env_value(spec, "JUPYTER_BASE_URL") or "").strip("/")
    return f"http://127.0.0.1:{port}/{base + '/' if base else ''}lab?token={token}"


def _env_value(spec: ContainerSpec, name: str) -> str | None:
    """The value the container gets for `name` from run's -e, or from -e / --env among the docker options."""
    given = list(spec.env)
    for flag, value in zip(spec.extra, (*spec.extra[1:], "")[: len(spec.extra)], strict=True):
        given += [value] if flag in ("-e", "--env") else [flag.partition("=")[2]] if flag.startswith("--env=") else []
    found = [item.partition("=")[2] for item in given if item.startswith(f"{name}=")]
    return found[-1] if found else None


def start_notebook(spec: ContainerSpec, port: int, engine: Containers, say: Say, *, token: str | None = None,
                   timeout: float | None = None) -> Notebook:  # fmt: skip
    """Start it and wait for healthy; not ready (exited, unhealthy, no health check, too slow): its last log lines
    said, removed, NotReadyError (exit 4); interrupted meanwhile: removed, Interrupted."""
    token = token or secrets.token_hex(24)
    try:  # a Ctrl-C or SIGTERM from `docker run -d` on removes the container (it holds the port)
        engine.start(spec, {TOKEN: token})
        problem = wait_ready(engine, spec.name, READY_TIMEOUT if timeout is None else timeout)
        said = engine.logs(spec.name, LOG_LINES).rstrip() if problem is not None else ""
    except KeyboardInterrupt:
        engine.stop(spec.name)
        raise Interrupted(f"interrupted: notebook container {spec.name} removed") from None
    if problem is not None:
        for line in said.splitlines() if said else ["(the container wrote no log lines)"]:
            say(f"  | {line}")
        engine.stop(spec.name)
        raise NotReadyError(
            f"the notebook server in {spec.image} did not become ready: {problem}; its last log lines are above "
            "(the container was removed)"
        )
    return Notebook(spec.name, notebook_url(spec, port, token))


def wait_ready(
    engine: Containers, name: str, timeout: float, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:  # fmt: skip
    """None once the container is healthy; else why it will not be."""
    deadline = clock() + timeout
    while True:
        state = engine.state(name)
        problem = not_ready(state)
        if state is not None and state.health == "healthy":
            return None
        # unhealthy is not final while time is left: a slow first start turns healthy again
        if problem is not None and not (state is not None and state.health == "unhealthy"):
            return problem
        if clock() > deadline:
            return problem or f"its health check had not passed after {timeout:.0f} s"
        sleep(POLL)


def not_ready(state: State | None) -> str | None:
    """Why the container will not become ready; None while it may (starting) or is (healthy)."""
    if state is None:
        return "the container is gone"
    if state.status in ("exited", "dead"):
        return f"the container exited (code {state.exit_code})"
    if state.health is None:
        return "the image has no HEALTHCHECK: not a torchyard notebook image (torchyard build --target notebook)"
    return "its health check failed (unhealthy)" if state.health == "unhealthy" else None


def follow_notebook(notebook: Notebook, engine: Containers) -> int:
    """Its logs on this terminal until it stops (the server shut down from the UI: its exit code) or Ctrl-C /
    SIGTERM (Interrupted: 130, 143); stopped and removed either way."""
    try:
        engine.follow(notebook.name)
        state = engine.state(notebook.name)
    except KeyboardInterrupt:
        engine.stop(notebook.name)
        raise Interrupted(f"interrupted: notebook container {notebook.name} stopped and removed") from None
    engine.stop(notebook.name)
    return state.exit_code if state is not None else 0
