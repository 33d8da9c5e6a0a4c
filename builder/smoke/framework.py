"""Checks, their results, and the registry the runner walks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .expect import Expectations

PASS, FAIL, SKIP = "passed", "failed", "skipped"
# Why every GPU check is skipped when one is: the first GPU check that finds it stands for the rest.
NO_GPU, CPU_BUILD = "no GPU visible", "CPU build of torch"


class Skipped(Exception):
    """A check that cannot run here (no GPU, nothing to compare against): reported, never a pass."""


class Failed(Exception):
    """A check whose verdict is negative; the message names the mismatch."""


@dataclass
class Context:
    expect: Expectations
    arch: str | None  # the target GPU architecture (--arch), e.g. sm_89
    require_gpu: bool
    small: bool = False  # smaller problems (simulated or emulated devices): figures are not comparable
    timeout_scale: float = 1.0  # --timeout-scale: a check that waits on processes of its own keeps inside it
    observed: dict[str, Any] = field(default_factory=dict)  # facts read from the image, for the report
    accepted: dict[str, list[str]] = field(default_factory=dict)  # --accept: a hygiene check's accepted exceptions


@dataclass(frozen=True)
class Check:
    name: str
    func: Callable[[Context], str]
    gpu: bool
    timeout: float


@dataclass
class Result:
    name: str
    status: str
    message: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


REGISTRY: list[Check] = []


def check(
    name: str, *, gpu: bool = False, timeout: float = 60.0
) -> Callable[[Callable[[Context], str]], Callable[[Context], str]]:
    """Register a check; it returns a one-line message on success and raises Failed / Skipped."""

    def register(func: Callable[[Context], str]) -> Callable[[Context], str]:
        REGISTRY.append(Check(name, func, gpu, timeout))
        return func

    return register
