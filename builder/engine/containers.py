"""Running containers: every container torchyard starts is removed on the way out, also on Ctrl-C."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from builder.core.errors import EngineError, Interrupted
from builder.core.process import check_cancelled
from builder.engine.images import Images
from builder.engine.probe import short
from builder.engine.types import Isolation, Mount, RunResult

OWNER_LABEL = "io.torchyard.run-by"  # host:pid of the torchyard process that started the container


class DockerEngine(Images):
    """The real engine: docker SDK + the docker CLI for BuildKit."""

    def run(
        self,
        image: str,
        command: list[str],
        *,
        mounts: tuple[Mount, ...] = (),
        gpus: str | None = None,
        timeout: float = 1800,
        user: str | None = None,
        isolation: Isolation | None = None,
    ) -> RunResult:
        with self._container(image, command, mounts, gpus, user, isolation) as container:
            try:
                missing = _start(container, image)
                if missing is not None:
                    return RunResult(NOT_FOUND, missing)
                return _wait(container, image, timeout)
            except (EngineError, Interrupted):
                raise
            except Exception:  # the SDK's own errors, and requests' when the socket closes under it
                gone = self.gone(f"the run of {image}")
                if gone is not None:
                    raise gone from None
                raise

    @contextmanager
    def _container(
        self,
        image: str,
        command: list[str],
        mounts: tuple[Mount, ...],
        gpus: str | None,
        user: str | None,
        isolation: Isolation | None = None,
    ) -> Iterator[Any]:
        import docker

        _sweep(self._sdk())
        kwargs: dict[str, Any] = {
            "labels": {OWNER_LABEL: _owner()},
            "volumes": {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in mounts},
            "shm_size": "2g",
            "network_mode": "none",
            "detach": True,
            "user": user,
        } | _isolated(isolation)
        if gpus and gpus != "none":
            count = -1 if gpus == "all" else int(gpus)
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        try:
            # create, then start (in run): a start that fails (no such executable) still leaves a created
            # container, which the finally below removes; containers.run() would leave it behind
            container = self._sdk().containers.create(image, command, **kwargs)
        except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            gone = self.gone(f"the creation of a container from {image}")
            raise gone or EngineError(f"could not create a container from {image}: {short(exc)}") from None
        try:
            yield container
        finally:
            # containers torchyard starts are always removed; an engine that went away removes nothing
            with suppress(docker.errors.DockerException, OSError):
                container.remove(force=True)


def _isolated(isolation: Isolation | None) -> dict[str, Any]:
    """The SDK's arguments for Isolation's options (none: the engine's defaults)."""
    found: dict[str, Any] = {}
    if isolation is None:
        return found
    if isolation.environment:
        found["environment"] = dict(isolation.environment)
    if isolation.read_only:
        found["read_only"] = True
    if isolation.tmpfs:
        found["tmpfs"] = dict(folder.partition(":")[::2] for folder in isolation.tmpfs)
    return found


NOT_FOUND = 127  # as a shell says it: the command's executable is not in the image


def _start(container: Any, image: str) -> str | None:
    """Start the container; the engine's words when the command's executable is not in the image (None: it
    started). Any other refusal by the engine is an EngineError."""
    import docker

    try:
        container.start()
    except docker.errors.APIError as exc:
        text = str(exc)
        if "executable file not found" in text or "no such file or directory" in text:
            return f"{image}: {short(exc)}"
        raise EngineError(f"could not start a container from {image}: {short(exc)}") from None
    return None


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _sweep(sdk: Any) -> None:
    """Remove what an earlier torchyard process could not: its containers, when the engine went away under it
    (the engine keeps them, stopped, when it comes back). Only exited containers whose process, on this host,
    is gone: a run beside this one keeps its own."""
    import docker

    host = socket.gethostname()
    with suppress(docker.errors.DockerException, OSError):
        for container in sdk.containers.list(all=True, filters={"label": OWNER_LABEL, "status": "exited"}):
            owner, _, pid = str(container.labels.get(OWNER_LABEL, "")).rpartition(":")
            if owner == host and pid.isdigit() and not _alive(int(pid)):
                container.remove(force=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _wait(container: Any, image: str, timeout: float) -> RunResult:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check_cancelled(f"{image[:19]} finished its run")  # the container is removed on the way out
        container.reload()
        if container.status == "exited":
            code = int(container.attrs["State"]["ExitCode"])
            return RunResult(code, container.logs().decode(errors="replace"))
        time.sleep(0.5)
    container.kill()
    return RunResult(-1, container.logs().decode(errors="replace"), timed_out=True)
