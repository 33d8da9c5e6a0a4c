"""Helpers for the render tests: the real matrix, its valid combinations by id, and host-independent plans.

Every plan here is made with the host's pip/SSL settings switched off (`NetworkFlags(use_host_settings=False)`):
the machines these tests run on set PIP_CERT, and a rendered file must not depend on that.
"""

from __future__ import annotations

import shlex
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from builder.core.archs import Arch
from builder.core.kinds import Platform, Strategy
from builder.matrix import Matrix, load_matrix
from builder.pipeline.plan import Plan, make_plan
from builder.render.network import Network, NetworkFlags, resolve_network
from builder.render.options import Extension, RenderOptions
from builder.render.reqfile import read_requirements_file
from builder.render.reqtypes import Requirements
from builder.resolve.combos import Combination
from builder.resolve.query import Query, known_arch
from builder.resolve.resolver import lookup

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_EXTENSION = ROOT / "examples" / "addone"


@cache
def matrix() -> Matrix:
    return load_matrix(str(ROOT / "matrix.toml"))


@cache
def valid_combinations(platform: Platform = Platform.AMD64) -> tuple[Combination, ...]:
    """Every valid combination, as `torchyard lookup --limit 0 --platform P` lists them (best first)."""
    return tuple(r.combo for r in lookup(matrix(), Query(platform=platform)).valid)


def combination(ident: str) -> Combination:
    """A combination by id (an id ending in -arm64 is linux/arm64's); it must be one lookup calls valid."""
    platform = Platform.ARM64 if ident.endswith("-arm64") else Platform.AMD64
    for c in valid_combinations(platform):
        if c.id == ident:
            return c
    raise AssertionError(f"{ident} is not a valid combination of the real matrix")


def no_host_network(**flags: Any) -> Network:
    return resolve_network(NetworkFlags(use_host_settings=False, **flags))


def arch(name: str) -> Arch:
    return known_arch(matrix(), name)


def addone(folder: Path = EXAMPLE_EXTENSION) -> Extension:
    """examples/addone (or a copy of it) as `--extension <folder>` names it."""
    return Extension(name=folder.name.replace("_", "-"), kind="path", spec=str(folder))


def requirements(
    text: str, folder: Path | None = None, name: str = "requirements.txt", env: dict[str, str] | None = None
) -> Requirements:
    """`--requirements <name>` holding `text`, read (in a new folder unless given); messages name it `name`."""
    path = (folder or Path(tempfile.mkdtemp(prefix="torchyard-req-"))) / name
    path.write_text(text)
    return read_requirements_file(path, name, env or {})


def options(strategy: Strategy = Strategy.WHEELS, **kwargs: Any) -> RenderOptions:
    """RenderOptions; a `requirements` text is written to a file and read, as --requirements reads one."""
    if isinstance(kwargs.get("requirements"), str):
        kwargs["requirements"] = requirements(kwargs["requirements"])
    base = RenderOptions(strategy=strategy, network=no_host_network())
    return replace(base, **kwargs)


def plan(ident: str, strategy: Strategy = Strategy.WHEELS, **kwargs: Any) -> Plan:
    return make_plan(matrix(), combination(ident), options(strategy, **kwargs))


def instructions(dockerfile: str, stage: str | None = None) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined; only those of `stage` when given
    (from its `FROM ... AS <stage>` up to the next FROM)."""
    found: list[tuple[str, str]] = []
    current = ""
    for line in dockerfile.splitlines():
        if not current and (not line.strip() or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + "\n"
            continue
        keyword, _, args = (current + line).partition(" ")
        found.append((keyword, args))
        current = ""
    if stage is None:
        return found
    start = next(i for i, (k, a) in enumerate(found) if k == "FROM" and a.endswith(f" AS {stage}"))
    end = next((i for i in range(start + 1, len(found)) if found[i][0] == "FROM"), len(found))
    return found[start:end]


def pairs(args: str) -> dict[str, str]:
    """KEY=value pairs of an ENV or LABEL instruction, quotes removed."""
    return dict(token.split("=", 1) for token in shlex.split(args))


def env_of(dockerfile: str, stage: str) -> dict[str, str]:
    """The environment a stage sets (its ENV instructions, in order)."""
    values: dict[str, str] = {}
    for keyword, args in instructions(dockerfile, stage):
        if keyword == "ENV":
            values.update(pairs(args))
    return values


def labels_of(dockerfile: str, stage: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for keyword, args in instructions(dockerfile, stage):
        if keyword == "LABEL":
            values.update(pairs(args))
    return values


def stages(dockerfile: str) -> list[str]:
    return [args.rsplit(" AS ", 1)[1] for keyword, args in instructions(dockerfile) if keyword == "FROM"]


def base_of(dockerfile: str, stage: str) -> str:
    return next(
        args.split(" AS ")[0]
        for keyword, args in instructions(dockerfile)
        if keyword == "FROM" and args.endswith(f" AS {stage}")
    )


# --- NVIDIA_REQUIRE_CUDA, evaluated as the NVIDIA container toolkit does (compat-facts §5c) -------------
# Space-separated constraints are ORed, comma-separated ones ANDed; `cuda` compares with the CUDA version
# the driver reports, `driver` with the driver version, `brand` with the GPU brand.

_OPS = (">=", "<=", ">", "<", "=")


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def _holds(constraint: str, driver: tuple[int, ...], reports: tuple[int, int], brand: str) -> bool:
    op = next(o for o in _OPS if o in constraint)
    key, value = constraint.split(op, 1)
    if key == "brand":
        assert op == "=", constraint
        return brand == value
    have: tuple[int, ...] = {"cuda": reports, "driver": driver}[key]
    want = _numbers(value)
    width = max(len(have), len(want))
    a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
    return {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "=": a == b}[op]


def admits(requirement: str, driver: str, reports: tuple[int, int], brand: str = "geforce") -> bool:
    """Would a container with this NVIDIA_REQUIRE_CUDA start on this driver / GPU brand?"""
    parts = _numbers(driver)
    return any(
        all(_holds(c, parts, reports, brand) for c in alternative.split(",")) for alternative in requirement.split(" ")
    )


def reported_cuda(driver: str) -> tuple[int, int]:
    """The CUDA version a driver reports: that of the newest branch at or below its own (matrix facts)."""
    branch = _numbers(driver)[0]
    return max((b for b in matrix().driver_branches if b.branch <= branch), key=lambda b: b.branch).reports_cuda
