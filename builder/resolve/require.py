"""The NVIDIA Container Toolkit's start check: an image's NVIDIA_REQUIRE_CUDA against a driver and a GPU.

Grammar (NVIDIA Container Toolkit docs): space-separated alternatives are ORed, comma-separated conditions ANDed;
`cuda>=X.Y` compares the CUDA version the driver reports, `driver>=N` / `driver<N` the driver, `brand=B` the GPU's
brand. A container whose image fails every alternative does not start ("unsatisfied condition: cuda>=12.8").
"""

from __future__ import annotations

import re

from builder.core.kinds import GpuClass
from builder.core.versions import Driver, driver_version
from builder.resolve.facts import Facts
from builder.resolve.gpus import Gpu
from builder.resolve.rules.check import Check, Missing, not_checked

_CONDITION = re.compile(r"^(cuda|driver|brand)(>=|<=|=|<|>)([A-Za-z0-9.]+)$", re.ASCII)
SOURCES = ("container-toolkit", "nvidia-cuda-images")


def brands(gpu: Gpu) -> frozenset[str]:
    """The NVML brands a GPU's name implies (approximate: NVIDIA documents the names, not a product list)."""
    name = gpu.name.lower()
    if gpu.kind is GpuClass.DATACENTER:
        return frozenset({"tesla", "nvidia"})
    for prefix, found in (("geforce", {"geforce", "geforcertx"}), ("titan", {"titan", "titanrtx"})):
        if name.startswith(prefix) or f"{prefix} " in name:
            return frozenset(found)
    if "quadro" in name:
        return frozenset({"quadro", "quadrortx"})
    return frozenset({"nvidia", "nvidiartx"})


def rule_container_start(f: Facts, driver: Driver | None, gpus: tuple[Gpu, ...], require: str | None) -> Check:
    if not require:
        return Check("container-start", True, "the image sets no NVIDIA_REQUIRE_CUDA: no start check", SOURCES)
    if driver is None:
        return not_checked(
            "container-start", f"no driver given (the image requires {require})", SOURCES, Missing.INPUT,
            f"a driver that meets NVIDIA_REQUIRE_CUDA {require.split()[0]}",
        )  # fmt: skip
    reported = f.reported_cuda(driver)
    unrecorded = f.unrecorded_driver(driver)
    if unrecorded is not None:
        return not_checked("container-start", unrecorded, SOURCES, Missing.FACT)
    if reported is None:
        return Check("container-start", False, f"driver branch {driver.branch} is not in the matrix", SOURCES)
    known = frozenset().union(*(brands(g) for g in gpus)) if gpus else frozenset()
    for alternative in require.split():
        if all(_holds(c, driver, reported, known) for c in alternative.split(",")):
            return Check("container-start", True, f"NVIDIA_REQUIRE_CUDA holds: {alternative}", SOURCES)
    first = require.split()[0]
    return Check(
        "container-start",
        False,
        f"the container will not start: driver {driver} reports CUDA {reported[0]}.{reported[1]}, the image "
        f"requires {first}" + (" (or a listed driver branch and GPU brand)" if " " in require else ""),
        SOURCES,
    )


def _holds(condition: str, driver: Driver, reported: tuple[int, int], known: frozenset[str]) -> bool:
    found = _CONDITION.match(condition)
    if found is None:
        return False  # what the toolkit cannot parse fails there too
    key, op, value = found.groups()
    if key == "brand":
        return op == "=" and value.lower() in known
    if key == "cuda":
        major, _, minor = value.partition(".")
        return _compare(reported, (int(major), int(minor or 0)), op)
    try:
        want = driver_version(value)
    except ValueError:  # `driver>=abc` matches the grammar's characters but is no driver version: it fails too
        return False
    width = max(len(driver.parts), len(want.parts))
    mine = driver.parts + (0,) * (width - len(driver.parts))
    return _compare(mine, want.parts + (0,) * (width - len(want.parts)), op)


def _compare(left: tuple[int, ...], right: tuple[int, ...], op: str) -> bool:
    return {">=": left >= right, "<=": left <= right, "<": left < right, ">": left > right, "=": left == right}[op]
