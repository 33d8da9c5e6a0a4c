"""The Docker seam: the one module that talks to the engine.

Engine calls (version, inspect, tag, push, pull, run, remove) go through the docker SDK; BuildKit
builds go through the docker CLI (`docker buildx build` where the plugin exists, else
`DOCKER_BUILDKIT=1 docker build`) as argv lists via builder.process.run_command. Unit tests replace
`Engine` (a Protocol) with a fake at this seam.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from builder import env
from builder.errors import BuildError, EngineError, Interrupted, PushError
from builder.process import check_cancelled, run_command

MIN_API = (1, 39)  # Docker 18.09: BuildKit secrets and cache mounts
DOCKER_ENV = env.DOCKER


@dataclass(frozen=True)
class EngineInfo:
    server_version: str
    api_version: str
    client: str
    buildx: bool
    platform: str = "linux/amd64"  # the engine's own os/architecture: other platforms run emulated


@dataclass(frozen=True)
class ImageInfo:
    id: str
    labels: dict[str, str]
    tags: tuple[str, ...]
    digests: tuple[str, ...]
    size: int
    env: tuple[str, ...] = ()
    platform: str = "linux/amd64"  # os/architecture as the image config says


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    output: str
    timed_out: bool = False


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True)
class BuildRequest:
    """One BuildKit build of one target: what the engine needs, with no command-line syntax in it."""

    context: Path
    dockerfile: Path
    target: str
    build_args: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[str, str], ...] = ()  # (id, file on the build host)
    labels: tuple[tuple[str, str], ...] = ()
    tags: tuple[str, ...] = ()  # none: the image is built under no name (tagged after verification)
    platform: str | None = None  # linux/arm64: a build for another platform (emulated where it is not native)


def build_command(request: BuildRequest, client: str = "docker", *, buildx: bool = False) -> list[str]:
    """The docker CLI argv of a build (the CLI is the BuildKit front end): buildx where the client has the
    plugin, else the classic `docker build` with DOCKER_BUILDKIT=1."""
    argv = [client, "buildx", "build", "--load"] if buildx else [client, "build"]
    argv += ["--progress=plain", "--target", request.target, "-f", str(request.dockerfile)]
    if request.platform:
        argv += ["--platform", request.platform]
    for key, value in request.build_args:
        argv += ["--build-arg", f"{key}={value}"]
    for ident, source in request.secrets:
        argv += ["--secret", f"id={ident},src={source}"]
    for key, value in sorted(request.labels):
        argv += ["--label", f"{key}={value}"]
    for ref in request.tags:
        argv += ["-t", ref]
    return [*argv, str(request.context)]


@dataclass(frozen=True)
class RegistryAuth:
    username: str
    password: str = field(repr=False)

    def sdk(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


class Engine(Protocol):
    def info(self) -> EngineInfo: ...
    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str: ...
    def inspect(self, ref: str) -> ImageInfo | None: ...
    def tag(self, image_id: str, ref: str) -> None: ...
    def untag(self, ref: str) -> None: ...
    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str: ...
    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo: ...
    def run(
        self,
        image: str,
        command: list[str],
        *,
        mounts: tuple[Mount, ...] = (),
        gpus: str | None = None,
        timeout: float = 1800,
        user: str | None = None,
    ) -> RunResult: ...
    def history(self, ref: str) -> list[str]: ...
    def save(self, ref: str, path: Path) -> None: ...
    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None: ...


class DockerEngine:
    """The real engine: docker SDK + the docker CLI for BuildKit."""

    def __init__(self) -> None:
        self._client: Any = None
        self._info: EngineInfo | None = None

    # -- checks -------------------------------------------------------------------------------------
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
        return EngineInfo(str(version.get("Version")), api, cli, buildx, platform)

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

    def daemon_info(self) -> dict[str, Any]:
        """`docker info` as the engine answers it (runtimes, CDI spec directories, versions)."""
        info: dict[str, Any] = _call(self._sdk().info, "ask the engine for its configuration")
        return info

    # -- builds -------------------------------------------------------------------------------------
    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str:
        info = self.info()
        with tempfile.TemporaryDirectory(prefix="torchyard-iid-") as tmp:
            iidfile = Path(tmp) / "iid"
            full = build_command(request, info.client, buildx=info.buildx)
            full.insert(len(full) - 1, f"--iidfile={iidfile}")  # the image id, read back below
            env = dict(os.environ, DOCKER_BUILDKIT="1")
            done = run_command(full, env=env, on_line=on_line)
            if done.returncode != 0:
                raise BuildError(f"docker build failed (exit {done.returncode}): {_last_error(done.tail)}")
            return iidfile.read_text().strip()

    # -- images -------------------------------------------------------------------------------------
    def inspect(self, ref: str) -> ImageInfo | None:
        import docker

        try:
            image = self._sdk().images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.DockerException as exc:
            raise EngineError(f"inspect {ref}: {exc}") from None
        attrs = image.attrs
        config = attrs.get("Config") or {}
        return ImageInfo(
            id=image.id,
            labels=dict(config.get("Labels") or {}),
            tags=tuple(image.tags),
            digests=tuple(attrs.get("RepoDigests") or ()),
            size=int(attrs.get("Size", 0)),
            env=tuple(config.get("Env") or ()),
            platform=f"{attrs.get('Os', 'linux')}/{attrs.get('Architecture', 'amd64')}",
        )

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        if not self._sdk().images.get(image_id).tag(repo, tag):
            raise EngineError(f"could not tag {image_id[:19]} as {ref}")

    def untag(self, ref: str) -> None:
        import docker

        with suppress(docker.errors.ImageNotFound):
            self._sdk().images.remove(ref, noprune=True)

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        repo, tag = split_ref(ref)
        digest = ""
        try:
            stream = self._sdk().api.push(
                repo, tag=tag, stream=True, decode=True, auth_config=auth.sdk() if auth else None
            )
            for event in stream:
                check_cancelled(f"{ref} was pushed")
                if "error" in event:
                    raise PushError(f"push {ref}: {event['error'].strip()}")
                digest = (event.get("aux") or {}).get("Digest", digest)
                if event.get("status") and event.get("id") is None:
                    on_line(str(event["status"]))
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while pushing {ref}") from None
        except (PushError, Interrupted):
            raise
        except Exception as exc:
            raise PushError(f"push {ref}: {_short(exc)}") from None
        if not digest:
            raise PushError(f"push {ref}: the registry returned no digest")
        return digest

    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo:
        repo, _, digest = ref.partition("@")
        try:
            self._sdk().api.pull(repo, tag=digest or None, auth_config=auth.sdk() if auth else None)
        except Exception as exc:
            raise PushError(f"pull {ref}: {_short(exc)}") from None
        found = self.inspect(ref)
        if found is None:
            raise PushError(f"pull {ref}: the image is not in the engine after the pull")
        return found

    def history(self, ref: str) -> list[str]:
        return [str(h.get("CreatedBy", "")) for h in self._sdk().api.history(ref)]

    def save(self, ref: str, path: Path) -> None:
        with path.open("wb") as out:
            for chunk in self._sdk().images.get(ref).save(named=True):
                out.write(chunk)

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        """A file of the image, read from a created (never started) container; None when there is none."""
        import io
        import tarfile

        import docker

        try:
            container = self._sdk().containers.create(image, command=["true"], network_mode="none")
        except docker.errors.DockerException as exc:
            raise EngineError(f"could not open {image}: {_short(exc)}") from None
        try:
            stream, _ = container.get_archive(path)
            data = b"".join(stream)[: limit + 4096]
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = tar.next()
                if member is None or not member.isfile() or member.size > limit:
                    return None
                handle = tar.extractfile(member)
                return handle.read() if handle else None
        except (docker.errors.NotFound, tarfile.TarError):
            return None
        finally:
            with suppress(docker.errors.DockerException):
                container.remove(force=True)

    # -- containers ---------------------------------------------------------------------------------
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
            "detach": True,
            "user": user,
        }
        if gpus and gpus != "none":
            count = -1 if gpus == "all" else int(gpus)
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=count, capabilities=[["gpu"]])]
        try:
            container = self._sdk().containers.run(image, command, **kwargs)
        except docker.errors.DockerException as exc:
            raise EngineError(f"could not start a container from {image}: {_short(exc)}") from None
        try:
            yield container
        finally:
            with suppress(docker.errors.DockerException):  # containers torchyard starts are always removed
                container.remove(force=True)


def split_ref(ref: str) -> tuple[str, str]:
    """'host:5000/team/img:tag' -> ('host:5000/team/img', 'tag'); a digest ref 'img@sha256:..' ->
    ('img', 'sha256:..'), which the registry API and the SDK's pull accept where a tag goes."""
    if "@" in ref:
        name, _, digest = ref.partition("@")
        return name, digest
    name, _, tag = ref.rpartition(":")
    if not name or "/" in tag:
        return ref, "latest"
    return name, tag


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
        raise EngineError(f"could not {what}: {_short(exc)}") from None


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
    return f"cannot reach the Docker engine at {host}: {_short(exc)}"


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def _last_error(tail: tuple[str, ...]) -> str:
    for line in reversed(tail):
        if "ERROR" in line or "error" in line:
            return line.strip()[:400]
    return tail[-1].strip()[:400] if tail else "no output"
