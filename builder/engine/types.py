"""The engine's contract: what a build asks for, what images and runs report, and the `Engine` protocol
that unit tests fake at this seam."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class EngineInfo:
    server_version: str
    api_version: str
    client: str
    buildx: bool
    platform: str = "linux/amd64"  # the engine's own os/architecture: other platforms run emulated
    containerd_store: bool = False  # images live in containerd's store (Docker 24+ opt-in, 29's default)

    @property
    def image_store(self) -> str:
        return "containerd" if self.containerd_store else "graph driver"


@dataclass(frozen=True)
class ImageInfo:
    id: str
    labels: dict[str, str]
    tags: tuple[str, ...]
    digests: tuple[str, ...]
    size: int
    env: tuple[str, ...] = ()
    platform: str = "linux/amd64"  # os/architecture as the image config says
    created: str = ""  # RFC 3339, as the engine says ("" where it does not)


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


@dataclass(frozen=True)
class Isolation:
    """More of `docker run`'s options: the environment, a read-only root filesystem, tmpfs mounts."""

    environment: tuple[tuple[str, str], ...] = ()
    read_only: bool = False
    tmpfs: tuple[str, ...] = ()  # folders to mount an empty tmpfs on, as --tmpfs takes them: /tmp or /tmp:exec


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
    # a registry build cache, repository:tag: BuildKit reads the steps' cache from it and writes every stage's back
    # (buildx only; builder/engine/probe.py cache_problem says where the engine cannot)
    cache: str | None = None


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
        isolation: Isolation | None = None,
    ) -> RunResult: ...
    def history(self, ref: str) -> list[str]: ...
    def save(self, ref: str, path: Path) -> None: ...
    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None: ...
