"""Finding and checking the engine: the SDK connection, its version and configuration, and a docker CLI
that can drive BuildKit. Errors from the engine become one line here."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from builder.core import env
from builder.core.errors import EngineError
from builder.engine.types import EngineInfo

MIN_API = (1, 39)  # Docker 18.09: BuildKit secrets and cache mounts
DOCKER_ENV = env.DOCKER


class Connection:
    """The SDK client, made on first use, and what the engine says of itself."""

    def __init__(self) -> None:
        self._client: Any = None
        self._info: EngineInfo | None = None

    def info(self) -> EngineInfo:
        if self._info is None:
            self._info = self._check()
        return self._info

    def _check(self) -> EngineInfo:
        client = self._sdk()
        version = _call(client.version, "ask the engine for its version")
        api = str(version.get("ApiVersion", "0.0"))
        if tuple(int(p) for p in api.split(".")[:2]) < MIN_API:
            raise EngineError(
                f"Docker engine {version.get('Version')} (API {api}) is too old: BuildKit secrets and "
                f"cache mounts need API >= {MIN_API[0]}.{MIN_API[1]} (Docker 18.09)"
            )
        cli, buildx = find_build_client()
        platform = f"{version.get('Os', 'linux')}/{version.get('Arch', 'amd64')}"
        store = containerd_store(_call(client.info, "ask the engine for its configuration"))
        return EngineInfo(str(version.get("Version")), api, cli, buildx, platform, store)

    def _sdk(self) -> Any:
        if self._client is None:
            import docker

            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            try:
                self._client = docker.from_env(timeout=600)
                self._client.ping()
            except Exception as exc:
                raise EngineError(_explain_connect(exc, host)) from None
        return self._client

    def gone(self, during: str) -> EngineError | None:
        """After a call failed: "went away" when the engine no longer answers a ping (killed, restarted, its socket
        gone), so the failure is not blamed on the build, the registry or a path; None when it still answers."""
        try:
            self._sdk().ping()
        except Exception:
            host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            return EngineError(f"the Docker engine at {host} went away during {during}: start it, then run again")
        return None

    def daemon_info(self) -> dict[str, Any]:
        """`docker info` as the engine answers it (runtimes, CDI spec directories, versions)."""
        info: dict[str, Any] = _call(self._sdk().info, "ask the engine for its configuration")
        return info


def containerd_store(info: dict[str, Any]) -> bool:
    """`docker info` says its images live in containerd's store (DriverStatus driver-type io.containerd.snapshotter)."""
    status = info.get("DriverStatus") or []
    return any(isinstance(row, list) and row[:1] == ["driver-type"] and "containerd" in str(row[1:2]) for row in status)


def find_build_client() -> tuple[str, bool]:
    """A docker CLI that can drive BuildKit: with buildx, or a pre-23 client honouring DOCKER_BUILDKIT=1."""
    candidates = [os.environ[DOCKER_ENV]] if os.environ.get(DOCKER_ENV) else []
    candidates += [p for p in (shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker") if p]
    existing = list(dict.fromkeys(p for p in candidates if Path(p).is_file()))
    if not existing:
        raise EngineError("no docker CLI found (BuildKit builds run through it): install docker.io or docker-ce-cli")
    for cli in existing:
        if _quiet([cli, "buildx", "version"]):
            return cli, True
    for cli in existing:
        version = _output([cli, "version", "--format", "{{.Client.Version}}"])
        if version and version.split(".")[0].isdigit() and int(version.split(".")[0]) < 23:
            return cli, False
    raise EngineError(
        f"no BuildKit-capable docker CLI among {', '.join(existing)}: install the buildx plugin "
        f"(docker-buildx-plugin), or point ${DOCKER_ENV} at a docker client older than 23"
    )


def cache_problem(info: EngineInfo) -> str | None:
    """Why this engine cannot read and write a registry build cache (None: it can). Cache export is buildx's, and
    the docker driver (the default builder) has it only on the containerd image store; another driver
    (docker-container, remote) exports from either store."""
    if not info.buildx:
        return (
            f"--cache: a registry build cache needs the buildx plugin, and {info.client} has none "
            "(install docker-buildx-plugin, or build without --cache)"
        )
    if info.containerd_store or buildx_driver(info.client) != "docker":
        return None
    return (
        f"--cache: the Docker {info.server_version} engine's default builder cannot export a build cache from the "
        'graph driver\'s image store: turn on the containerd image store ("features": {"containerd-snapshotter": '
        "true} in daemon.json), or select a docker-container builder (docker buildx create --use)"
    )


def buildx_driver(client: str) -> str:
    """The driver of buildx's current builder (docker, docker-container, kubernetes, remote); "docker", the default
    builder's, where `docker buildx inspect` does not say."""
    for line in _output([client, "buildx", "inspect"]).splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Driver" and value.strip():
            return value.strip()
    return "docker"


def _quiet(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _output(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _call(func: Callable[[], Any], what: str) -> Any:
    try:
        return func()
    except Exception as exc:
        raise EngineError(f"could not {what}: {short(exc)}") from None


def _explain_connect(exc: BaseException, host: str) -> str:
    text = str(exc)
    if "Permission denied" in text or isinstance(exc.__context__, PermissionError):
        path = host.removeprefix("unix://")
        return (
            f"no permission on the Docker socket {path}: add your user to the docker group "
            "(then log in again) or run as root"
        )
    if "No such file" in text or "Connection refused" in text or "FileNotFoundError" in text:
        return f"no Docker engine answers at {host}: start dockerd (or Docker Desktop), or set DOCKER_HOST"
    return f"cannot reach the Docker engine at {host}: {short(exc)}"


def short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
