"""`torchyard doctor --check`: start the image with the flags `torchyard run` uses, run the probe
(builder/smoke/runtime_probe.py) in it, and set what the container saw beside doctor's static answer.

Two parts, each passed, failed or not checked: the CPU part (torch imports, its versions, a CPU matmul) and the
GPU part (torch.cuda.is_available(), every GPU, a matmul on each against the CPU, NCCL). Without a GPU here the
GPU part is not checked (never passed). A static answer that says the GPUs can be used while the container
sees none is a problem with its fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.core.errors import EngineError, PushError
from builder.engine.interactive import ContainerSpec, Exited, container_name, docker_run_argv, run_container
from builder.host.doctor import NVIDIA_TOOLKIT_URL, Diagnosis, Problem
from builder.host.identity import Caller, env_of
from builder.host.launch import Images, gpu_access

PROBE = Path(__file__).resolve().parents[1] / "smoke" / "runtime_probe.py"
MARKER = "TORCHYARD-PROBE "
PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"
NO_PYTHON = (126, 127)  # docker run: the command cannot be run / was not found
RUNTIME_FIX = (
    "give containers the GPUs: install the NVIDIA Container Toolkit and run `nvidia-ctk runtime configure "
    "--runtime=docker`, then restart Docker; or with CDI (Docker 25+): `nvidia-ctk cdi generate "
    f"--output=/etc/cdi/nvidia.yaml` ({NVIDIA_TOOLKIT_URL})"
)


@dataclass(frozen=True)
class Part:
    status: str  # passed | failed | not checked
    detail: str


@dataclass
class ContainerCheck:
    image: str
    command: str  # the docker run line (the probe's text shortened)
    exit_code: int | None = None  # None: not started
    timed_out: bool = False
    seen: dict[str, Any] = field(default_factory=dict)  # what the probe printed
    cpu: Part = Part(NOT_CHECKED, "the container did not run")
    gpu: Part = Part(NOT_CHECKED, "the container did not run")
    problems: list[Problem] = field(default_factory=list)


def probe_spec(d: Diagnosis, image: str, who: Caller | None, python: str = "python3") -> ContainerSpec:
    """The container `run` would start (GPU flags, --ipc=host, the caller's user and name), with the probe as
    its command, no workspace and no stdin."""
    gpu, _ = gpu_access(d.host, d.runtime)
    command = (python, "-c", PROBE.read_text())
    return ContainerSpec(image=image, command=command, name=container_name("torchyard-check"), gpu_flags=gpu,
                         user=who.user if who else None, env=env_of(who) if who else (),
                         interactive=False)  # fmt: skip


def check_image(d: Diagnosis, image: str, user: Caller | None, timeout: float) -> ContainerCheck:
    """Run the probe in `image` (python3, else python) and judge what it saw."""
    spec = probe_spec(d, image, user)
    exited = run_container(spec, capture=True, timeout=timeout)
    if exited.code in NO_PYTHON and MARKER not in exited.output:
        spec = probe_spec(d, image, user, "python")
        exited = run_container(spec, capture=True, timeout=timeout)
    return judge(d, image, shown(spec), exited)


def shown(spec: ContainerSpec) -> str:
    argv = docker_run_argv(spec)
    return " ".join(argv[:-1]) + " <builder/smoke/runtime_probe.py>"


def judge(d: Diagnosis, image: str, command: str, exited: Exited) -> ContainerCheck:
    check = ContainerCheck(image, command, exited.code, exited.timed_out)
    seen = _probe_line(exited.output)
    if seen is None:
        why = "timed out" if exited.timed_out else f"exited {exited.code} without the probe's answer"
        lines = exited.output.strip().splitlines()
        errors = [line for line in lines if "rror" in line]  # docker's own "Error response from daemon: ..."
        tail = (errors[-1] if errors else " ".join(lines[-2:]))[-300:]
        check.cpu = Part(FAILED, f"the probe {why}" + (f": {tail}" if tail else ""))
        check.gpu = Part(NOT_CHECKED, "the probe gave no answer")
        return check
    check.seen = seen
    check.cpu = _cpu_part(seen)
    check.gpu, check.problems = _gpu_part(d, seen)
    return check


def _probe_line(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            try:
                found = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def _cpu_part(seen: dict[str, Any]) -> Part:
    if seen.get("error"):
        return Part(FAILED, str(seen["error"]))
    cpu = seen.get("cpu") or {}
    versions = f"torch {seen.get('torch')}, CUDA {seen.get('cuda') or 'none (a CPU build)'}"
    versions += f", cuDNN {seen.get('cudnn') or 'none'}, NCCL {seen.get('nccl') or 'none'}"
    return Part(PASSED if cpu.get("ok") else FAILED, f"{versions}; {cpu.get('detail', 'no CPU check ran')}")


def _gpu_part(d: Diagnosis, seen: dict[str, Any]) -> tuple[Part, list[Problem]]:
    if not d.host.gpus:
        why = "; ".join(d.host.reading.problems) or "no NVIDIA GPU found"
        return Part(NOT_CHECKED, f"no GPU on this machine ({why})"), []
    if seen.get("error"):
        return Part(NOT_CHECKED, "torch did not import"), []
    if not seen.get("cuda"):
        fix = "run an image with a CUDA build (torchyard doctor names the one for this machine)"
        cpu_build = Problem("container-gpu", f"torch {seen.get('torch')} in the image is a CPU build", fix)
        return Part(FAILED, "the image's torch is a CPU build: it cannot use the GPUs here"), [cpu_build]
    if not seen.get("cuda_available"):
        return _no_gpu_seen(d, seen)
    return _devices(d, seen)


def _no_gpu_seen(d: Diagnosis, seen: dict[str, Any]) -> tuple[Part, list[Problem]]:
    """The classic: the machine has GPUs the image can use, the container sees none."""
    flags = " ".join(gpu_access(d.host, d.runtime)[0])
    message = (
        f"this machine has {len(d.host.gpus)} GPU(s) and the image's CUDA {seen.get('cuda')} build, but "
        f"torch.cuda.is_available() is False in the container started with {flags}"
        + (f" ({seen['cuda_error']})" if seen.get("cuda_error") else "")
    )
    return Part(FAILED, "torch.cuda.is_available() is False"), [Problem("container-gpu", message, RUNTIME_FIX)]


def _devices(d: Diagnosis, seen: dict[str, Any]) -> tuple[Part, list[Problem]]:
    devices = [x for x in seen.get("devices") or [] if isinstance(x, dict)]
    bad = [f"GPU {x.get('index')} ({x.get('name')}): {x.get('detail')}" for x in devices if not x.get("ok")]
    problems = [Problem("container-gpu", b, "see nvidia-smi and dmesg for this GPU; torchyard smoke IMAGE --gpus all "
                        "runs the whole suite") for b in bad]  # fmt: skip
    if len(devices) != len(d.host.gpus):
        problems.append(Problem("container-gpu", f"the container sees {len(devices)} GPU(s), nvidia-smi "
                                f"{len(d.host.gpus)}", "check CUDA_VISIBLE_DEVICES and the --gpus flag"))  # fmt: skip
    if not seen.get("nccl"):
        problems.append(Problem("nccl", f"no NCCL in torch {seen.get('torch')}: multi-GPU training will fail",
                                "use an image whose torch has NCCL (every torchyard CUDA image has)"))  # fmt: skip
    names = ", ".join(f"{x.get('index')}: {x.get('name')}" for x in devices)
    if problems:
        return Part(FAILED, "; ".join(p.message for p in problems)), problems
    return Part(PASSED, f"{len(devices)} GPU(s) ({names}); a matmul on each matches the CPU; NCCL {seen['nccl']}"), []


def check_here(
    d: Diagnosis, image: str, engine: Images, user: Caller | None, timeout: float, *, pull: bool
) -> ContainerCheck:
    """The check of `image` where it can be had without a build: the local engine, else a pull (a given image,
    or the team's repository named); otherwise not checked, with the command that builds it (or the engine's
    error: doctor still answers)."""
    try:
        return _check_here(d, image, engine, user, timeout, pull=pull)
    except EngineError as exc:
        return ContainerCheck(image, "", cpu=Part(NOT_CHECKED, str(exc)), gpu=Part(NOT_CHECKED, str(exc)))


def _check_here(
    d: Diagnosis, image: str, engine: Images, user: Caller | None, timeout: float, *, pull: bool
) -> ContainerCheck:
    if engine.inspect(image) is None:
        why = f"{image} is not in the local engine"
        try:
            if not pull:
                raise PushError("no --repo / TORCHYARD_REPO to pull it from")
            engine.pull(image, None)
        except PushError as exc:
            chosen = d.recommended is not None and d.recommended.image == image
            build = f": build it with `{d.recommended.build}`" if chosen and d.recommended else ""
            return ContainerCheck(image, "", cpu=Part(NOT_CHECKED, f"{why} ({exc}){build}"), gpu=Part(NOT_CHECKED, why))
    return check_image(d, image, user, timeout)
