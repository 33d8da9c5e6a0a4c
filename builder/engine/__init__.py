"""The Docker seam: the one package that talks to the engine.

Engine calls (version, inspect, tag, push, pull, run, remove) go through the docker SDK; BuildKit builds go
through the docker CLI (`docker buildx build` where the plugin exists, else `DOCKER_BUILDKIT=1 docker build`)
as argv lists via builder.core.process.run_command. Unit tests replace `Engine` (a Protocol) with a fake at
this seam. types: the contract; probe: finding and checking the engine; images: builds and images;
containers: runs.
"""

from builder.engine.containers import DockerEngine
from builder.engine.images import build_command, split_ref
from builder.engine.probe import MIN_API, find_build_client
from builder.engine.types import (
    BuildRequest,
    Engine,
    EngineInfo,
    ImageInfo,
    Isolation,
    Mount,
    RegistryAuth,
    RunResult,
)

__all__ = [
    "MIN_API",
    "BuildRequest",
    "DockerEngine",
    "Engine",
    "EngineInfo",
    "ImageInfo",
    "Isolation",
    "Mount",
    "RegistryAuth",
    "RunResult",
    "build_command",
    "find_build_client",
    "split_ref",
]
