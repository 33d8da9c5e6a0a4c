"""`torchyard devcontainer`: a devcontainer.json (VS Code's Dev Containers, the devcontainers CLI) for this machine:
the image doctor's locator finds here (the notebook flavor by default), and the GPU access this engine needs.

GPU access, by what the devcontainers CLI can see (it asks `docker info` for an `nvidia` runtime, and only then
turns `hostRequirements.gpu` into `--gpus all`; devcontainers/spec 82, 144, 469):
- an engine with the nvidia runtime registered: `hostRequirements.gpu: true`, no GPU flag in runArgs (the CLI adds
  `--gpus all` itself; one in runArgs too would ask docker for the GPUs twice);
- the NVIDIA Container Toolkit's hook without the runtime registered: `--gpus all` in runArgs, no hostRequirements
  (the CLI would see no GPU and warn);
- CDI: `--device nvidia.com/gpu=all` in runArgs, no hostRequirements (the CLI's `--gpus all` fails there);
- no GPU: neither;
- `--any-host`: `hostRequirements.gpu: "optional"` (GPUs where the CLI sees the runtime, none elsewhere).
Always `--ipc=host` (DataLoader workers, NCCL), never a CUDA feature (torch's wheels carry CUDA).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builder.core.errors import TorchyardError
from builder.core.kinds import Flavor
from builder.host.launch import gpu_access
from builder.host.locate import Location, Where
from builder.host.notebook_launch import USERS_GID
from builder.host.notebook_launch import WORK as NOTEBOOK_WORK
from builder.host.probe import Host
from builder.host.runtime import RuntimeReading

if TYPE_CHECKING:
    from builder.oci.client import Distribution

DEFAULT_PATH = ".devcontainer/devcontainer.json"
NOTEBOOK_USER = "jovyan"
WORKSPACE = "/workspace"  # the runtime image's, as `torchyard run` mounts it
DIGEST_TIMEOUT = 5.0


@dataclass(frozen=True)
class GpuAccess:
    run_args: tuple[str, ...]  # the engine's GPU flags, where the devcontainers CLI would not add them
    requirement: bool | str | None  # hostRequirements.gpu: True, "optional"; None: left out
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DevcontainerSpec:
    image: str
    flavor: Flavor
    gpu: GpuAccess
    serve: bool = False  # the notebook server starts with the container (overrideCommand false, port forwarded)


def devcontainer_gpu(host: Host, runtime: RuntimeReading | None, *, any_host: bool = False) -> GpuAccess:
    """How the dev container gets this machine's GPUs (the module's docstring says the rule)."""
    if any_host:
        return GpuAccess((), "optional", ("--any-host: the GPUs where the devcontainers CLI sees docker's nvidia "
                                          "runtime, none elsewhere",))  # fmt: skip
    flags, notes = gpu_access(host, runtime)
    if flags == ("--gpus", "all") and runtime is not None and "nvidia" in runtime.runtimes:
        return GpuAccess((), True, tuple(notes))
    return GpuAccess(flags, None, tuple(notes))


def devcontainer_json(spec: DevcontainerSpec) -> dict[str, Any]:
    """The file's content: the notebook image as its user jovyan (its UID changed to yours by the CLI), or the
    runtime image as root; the folder at the image's work folder; the notebook server only when asked."""
    notebook = spec.flavor is Flavor.NOTEBOOK
    work = NOTEBOOK_WORK if notebook else WORKSPACE
    found: dict[str, Any] = {
        "name": f"torchyard {spec.flavor.value}",
        "image": spec.image,
        "workspaceFolder": work,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={work},type=bind",
        "runArgs": [*spec.gpu.run_args, "--ipc=host", *(["--group-add", USERS_GID] if notebook else [])],
        "remoteUser": NOTEBOOK_USER if notebook else "root",
        "overrideCommand": not spec.serve,
    }
    if notebook:
        found["updateRemoteUserUID"] = True
    if spec.serve:  # the server runs as the (UID-updated) user the CLI gives the home to, not as the image's 1000
        found["forwardPorts"] = [8888]
        if notebook:
            found["containerUser"] = NOTEBOOK_USER
    if spec.gpu.requirement is not None:
        found["hostRequirements"] = {"gpu": spec.gpu.requirement}
    return found


def render_json(content: dict[str, Any]) -> str:
    """Deterministic: keys sorted, two-space indents, a trailing newline."""
    return json.dumps(content, indent=2, sort_keys=True) + "\n"


def image_of(location: Location, client: Distribution | None = None) -> tuple[str, list[str]]:
    """The reference the file names: the local immutable tag, or repository@digest for one in the registry (the
    tag, said so, when the digest cannot be read)."""
    ref = location.reference
    assert ref is not None
    if location.where is not Where.REPOSITORY:
        return ref, []
    from builder.net.http import Http, Policy  # requests: only for an image in a registry
    from builder.oci.client import Distribution
    from builder.oci.refs import parse_repo

    name, _, tag = ref.rpartition(":")
    client = client or Distribution(Http(Policy(timeout=DIGEST_TIMEOUT, retries=1, connect_retries=1)))
    try:
        found = client.manifest(parse_repo(name), tag)
    except TorchyardError as exc:
        return ref, [f"the digest of {ref} could not be read ({exc}): the file names the tag"]
    if found is None:
        return ref, [f"{ref} is gone from the registry: the file names the tag"]
    return f"{name}@{found.digest}", []
