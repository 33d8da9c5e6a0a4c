"""Read the container runtime: a Docker engine, and how it gives containers GPUs (NVIDIA runtime, CDI, --gpus)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from builder.engine.probe import containerd_store
from builder.host.system import System

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
DAEMON_JSON = "/etc/docker/daemon.json"
DEFAULT_SHM_MIB = 64  # Docker's default /dev/shm for a container
HOOK = "nvidia-container-runtime-hook"  # what `docker run --gpus` calls (NVIDIA Container Toolkit)

DaemonInfo = Callable[[], dict[str, Any]]


@dataclass
class RuntimeReading:
    engine: str | None = None  # the engine's version; None: no engine answered
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    gpus_flag: bool = False  # `docker run --gpus` can work: the toolkit's hook or the nvidia runtime is there
    cdi_specs: tuple[str, ...] = ()  # CDI spec files that name nvidia.com/gpu devices
    cdi_enabled: bool = False  # the engine reads CDI specs (Docker 25+ with CDI on)
    shm_mib: int = DEFAULT_SHM_MIB
    containerd_store: bool = False  # images live in containerd's store (docker info's driver-type)
    problems: list[str] = field(default_factory=list)

    @property
    def image_store(self) -> str:
        return "containerd image store" if self.containerd_store else "graph driver"

    @property
    def gpu_flags(self) -> list[str]:
        """How `docker run` asks for every GPU here: CDI where the engine uses it, else --gpus all."""
        if self.cdi_specs and self.cdi_enabled and not self.gpus_flag:
            return ["--device", "nvidia.com/gpu=all"]
        return ["--gpus", "all"]


def read_runtime(system: System, daemon_info: DaemonInfo) -> RuntimeReading:
    reading = RuntimeReading()
    try:
        info = daemon_info()
    except Exception as exc:  # an EngineError with the reason, or anything the SDK raises
        reading.problems.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        info = {}
    reading.engine = str(info["ServerVersion"]) if info.get("ServerVersion") else None
    reading.runtimes = tuple(sorted((info.get("Runtimes") or {}).keys()))
    reading.default_runtime = info.get("DefaultRuntime")
    reading.cdi_enabled = bool(info.get("CDISpecDirs"))
    reading.containerd_store = containerd_store(info)
    hook = system.run(["sh", "-c", f"command -v {HOOK}"]).code == 0
    reading.gpus_flag = hook or "nvidia" in reading.runtimes
    dirs = tuple(info.get("CDISpecDirs") or CDI_DIRS)
    reading.cdi_specs = tuple(
        path for path in _spec_files(system, dirs) if "nvidia.com/gpu" in (system.read(path) or "")
    )
    reading.shm_mib = _shm_mib(system.read(DAEMON_JSON))
    return reading


def _spec_files(system: System, dirs: tuple[str, ...]) -> list[str]:
    return [path for d in dirs for pattern in ("*.yaml", "*.yml", "*.json") for path in system.glob(f"{d}/{pattern}")]


_SIZE = re.compile(r"^(\d+)\s*([kmg]?)b?$", re.IGNORECASE | re.ASCII)


def _shm_mib(text: str | None) -> int:
    """daemon.json's default-shm-size (64m, 1g, bytes), else Docker's default."""
    try:
        value = json.loads(text or "{}").get("default-shm-size")
    except (ValueError, AttributeError):
        return DEFAULT_SHM_MIB
    match = _SIZE.match(str(value or "").strip())
    if not match:
        return DEFAULT_SHM_MIB
    number, unit = int(match[1]), match[2].lower()
    return {"": number // (1 << 20), "k": number // 1024, "m": number, "g": number * 1024}[unit]
