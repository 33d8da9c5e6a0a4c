"""GPU architecture value type: sm_XY, optionally arch-specific (a) or family-specific (f)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from builder.core.errors import UsageError

Suffix = Literal["", "a", "f"]
_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{1,2})\.?(\d)([af]?)$", re.ASCII)


@dataclass(frozen=True, order=True)
class Arch:
    """A GPU architecture (compute capability), optionally arch-specific (a) or family (f)."""

    major: int
    minor: int
    suffix: Suffix = ""

    @property
    def name(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def cc(self) -> str:
        """Compute capability as TORCH_CUDA_ARCH_LIST writes it: 8.9, 9.0a."""
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def cmake(self) -> str:
        """CMAKE_CUDA_ARCHITECTURES spelling: 89, 90a."""
        return f"{self.major}{self.minor}{self.suffix}"

    @property
    def base(self) -> Arch:
        """The GPU this target runs on: sm_90a -> sm_90."""
        return Arch(self.major, self.minor)

    @property
    def key(self) -> tuple[int, int]:
        return self.major, self.minor

    def __str__(self) -> str:
        return self.name


@functools.cache
def arch_from(text: str) -> Arch:
    """Accepts sm_89, sm89, 8.9, 89, compute_89, sm_90a, 9.0a, 120; ValueError if malformed."""
    match = _ARCH_RE.match(text.strip().lower())
    if not match or int(match[1]) == 0:
        raise ValueError(f"{text!r} is not a GPU architecture (examples: sm_89, 8.9, sm_90a)")
    return Arch(int(match[1]), int(match[2]), match[3])  # type: ignore[arg-type]


def parse_arch(text: str, what: str = "--arch") -> Arch:
    """An architecture given on the command line: one UsageError line naming the flag."""
    try:
        return arch_from(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None
