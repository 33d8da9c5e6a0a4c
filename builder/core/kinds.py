"""Closed vocabularies, in one low module every layer may import: enums, their parsing, "did you mean"."""

from __future__ import annotations

import platform as _platform
from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

from builder.core.errors import UsageError


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    import difflib  # only an error needs it

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


E = TypeVar("E", bound=StrEnum)


def parse_choice(kind: type[E], value: str, flag: str) -> E:
    """One member of `kind` by its value, or one UsageError naming the flag and the choices."""
    names = [e.value for e in kind]
    if value not in names:
        raise UsageError(f"{flag}: {value!r} is not one of {', '.join(names)}{did_you_mean(value, names)}")
    return kind(value)


class Flavor(StrEnum):
    RUNTIME = "runtime"
    DEVEL = "devel"
    INFERENCE = "inference"  # runtime + torch.onnx's exporter packages + ONNX Runtime
    NOTEBOOK = "notebook"  # runtime + JupyterLab, a non-root user, docker-stacks' start contract

    @classmethod
    def family(cls) -> tuple[Flavor, ...]:
        """What `--target all` and a publish entry without `flavors` mean: every flavor but the notebook, which
        is asked for by name (a family does not grow a JupyterLab image unasked)."""
        return tuple(f for f in cls if f is not cls.NOTEBOOK)


class Target(StrEnum):
    """What `--target` selects: one flavor, or every flavor the combination can have."""

    RUNTIME = "runtime"
    DEVEL = "devel"
    INFERENCE = "inference"
    NOTEBOOK = "notebook"
    ALL = "all"

    def flavors(self) -> tuple[Flavor, ...]:
        return Flavor.family() if self is Target.ALL else (Flavor(self.value),)


class Strategy(StrEnum):
    WHEELS = "wheels"
    CUDA_BASE = "cuda-base"


class Installer(StrEnum):
    """What installs the venv: uv (faster, parallel) or pip; the same constraints, secrets and caches."""

    UV = "uv"
    PIP = "pip"


class Platform(StrEnum):
    """An OCI platform torch publishes Linux wheels for (Docker's names)."""

    AMD64 = "linux/amd64"
    ARM64 = "linux/arm64"

    @property
    def arch(self) -> str:
        """Docker's architecture name: amd64, arm64 (also the matrix.toml sub-table key)."""
        return self.value.split("/", 1)[1]

    @property
    def machine(self) -> str:
        """What `uname -m` and wheel platform tags say: x86_64, aarch64."""
        return _MACHINES[self]

    @classmethod
    def of_machine(cls, machine: str) -> Platform | None:
        """x86_64 / amd64 / aarch64 / arm64 -> the platform; None for a machine torch has no Linux wheels for."""
        wanted = machine.strip().lower()
        for member, name in _MACHINES.items():
            if wanted in (name, member.arch):
                return member
        return None

    @classmethod
    def here(cls) -> Platform | None:
        return cls.of_machine(_platform.machine())


_MACHINES = {Platform.AMD64: "x86_64", Platform.ARM64: "aarch64"}


def parse_platform(value: str, flag: str = "--platform") -> Platform:
    """linux/amd64, linux/arm64; also amd64 / arm64 / x86_64 / aarch64 as people type them."""
    text = value.strip()
    found = Platform.of_machine(text.removeprefix("linux/"))
    if found is None or (text.count("/") and not text.startswith("linux/")):
        names = [p.value for p in Platform]
        raise UsageError(
            f"{flag}: {value!r} is not a platform torchyard builds for: {', '.join(names)}{did_you_mean(text, names)}"
        )
    return found


class GpuClass(StrEnum):
    CONSUMER = "consumer"
    DATACENTER = "datacenter"
    EMBEDDED = "embedded"


class Status(StrEnum):
    """What happened to one image of a build or a publish."""

    PENDING = "pending"
    BUILT = "built"
    UP_TO_DATE = "up-to-date"
    SKIPPED = "skipped"
    FAILED = "failed"
    EXCLUDED = "excluded"


class AliasStatus(StrEnum):
    MOVED = "moved"
    UNCHANGED = "unchanged"
    HELD = "held"


def parse_gpus(value: str | None, flag: str = "--gpus") -> str | None:
    """`--gpus all|none|N`: which GPUs a container gets (None: not given)."""
    if value is None:
        return None
    if value in ("all", "none") or (value.isascii() and value.isdigit() and int(value) > 0):
        return value
    raise UsageError(f"{flag}: {value!r} is not all, none or a positive number of GPUs")
