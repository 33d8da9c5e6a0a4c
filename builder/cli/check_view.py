"""`torchyard doctor --check [IMAGE]`: the check in a container, run and printed beside doctor's static answer."""

from __future__ import annotations

from typing import Any

from builder.host.container_check import FAILED, ContainerCheck, check_here
from builder.host.doctor import Diagnosis
from builder.host.identity import caller
from builder.host.locate import registry_of


def run_check(d: Diagnosis, image: str, timeout: float) -> ContainerCheck:
    """IMAGE ("" for the one doctor located, else the recommended one), started as `torchyard run` starts it, as
    the caller's user."""
    from builder.engine import DockerEngine

    target = image or d.image or (d.recommended.image if d.recommended else "")
    if not target:
        raise_no_image()
    pull = bool(image) or registry_of(d.repo) is not None
    return check_here(d, target, DockerEngine(), caller(), timeout, pull=pull)


def raise_no_image() -> None:
    from builder.core.errors import NoMatchError

    raise NoMatchError("doctor --check: no image runs on this machine to check (give one: --check IMAGE)")


def failed(check: ContainerCheck) -> bool:
    return FAILED in (check.cpu.status, check.gpu.status)


def check_data(check: ContainerCheck) -> dict[str, Any]:
    seen = check.seen
    return {
        "image": check.image,
        "docker_run": check.command,
        "exit_code": check.exit_code,
        "timed_out": check.timed_out,
        "torch": seen.get("torch"),
        "cuda": seen.get("cuda"),
        "cudnn": seen.get("cudnn"),
        "nccl": seen.get("nccl"),
        "cuda_available": seen.get("cuda_available"),
        "devices": [
            {"index": x.get("index"), "name": x.get("name"), "matmul": "passed" if x.get("ok") else "failed"}
            for x in seen.get("devices") or []
        ],
        "cpu": {"status": check.cpu.status, "detail": check.cpu.detail},
        "gpu": {"status": check.gpu.status, "detail": check.gpu.detail},
        "problems": [{"check": p.check, "message": p.message, "fix": p.fix} for p in check.problems],
    }


def check_lines(check: ContainerCheck) -> list[str]:
    lines = ["", f"checked in a container: {check.image}"]
    if check.command:
        lines.append(f"  {check.command}")
    lines += [f"  CPU part: {check.cpu.status.upper()}: {check.cpu.detail}"]
    lines += [f"  GPU part: {check.gpu.status.upper()}: {check.gpu.detail}"]
    for p in check.problems:
        lines += [f"  problem {p.check}: {p.message}", f"    fix: {p.fix}"]
    return lines
