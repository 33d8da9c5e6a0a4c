"""Running containers: every container torchyard starts is removed on the way out, also on Ctrl-C."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from builder.core.errors import EngineError
from builder.core.process import check_cancelled
from builder.engine.images import Images
from builder.engine.probe import short
from builder.engine.types import Mount, RunResult


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
    ) -> RunResult:
        with self._container(image, command, mounts, gpus, user) as container:
            missing = _start(container, image)
            if missing is not None:
                return RunResult(NOT_FOUND, missing)
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

    @contextmanager
    def _container(
        self, image: str, command: list[str], mounts: tuple[Mount, ...], gpus: str | None, user: str | None
    ) -> Iterator[Any]:
        import docker

        kwargs: dict[str, Any] = {
            "volumes": {m.source: {"bind": m.target, "mode": "ro" if m.read_only else "rw"} for m in mounts},
            "shm_size": "2g",
            "network_mode": "none",
            "user": user,
        }
        if gpus and gpus != "none":
            count = -1 if gpus == "all" else int(gpus)
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        try:
            # create, then start (in run): a start that fails (no such executable) still leaves a created
            # container, which the finally below removes; containers.run() would leave it behind
            container = self._sdk().containers.create(image, command, **kwargs)
        except docker.errors.DockerException as exc:
            raise EngineError(f"could not create a container from {image}: {short(exc)}") from None
        try:
            yield container
        finally:
            with suppress(docker.errors.DockerException):  # containers torchyard starts are always removed
                container.remove(force=True)


NOT_FOUND = 127  # as a shell says it: the command's executable is not in the image


def _start(container: Any, image: str) -> str | None:
    """Start the container; the engine's words when the command's executable is not in the image (None: it
    started). Any other refusal is an EngineError."""
    import docker

    try:
        container.start()
    except docker.errors.APIError as exc:
        text = str(exc)
        if "executable file not found" in text or "no such file or directory" in text:
            return f"{image}: {short(exc)}"
        raise EngineError(f"could not start a container from {image}: {short(exc)}") from None
    return None
