"""The seam between the host probe and the machine: commands, files, the CPU. Tests replace it with recorded
outputs of real machines; nothing else in builder/host touches the system."""

from __future__ import annotations

import glob
import os
import platform
import subprocess
from dataclasses import dataclass
from typing import Protocol

NOT_FOUND = 127  # what a shell says for a missing command


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str = ""


class System(Protocol):
    def run(self, argv: list[str], timeout: float = 10.0) -> Ran: ...
    def read(self, path: str, limit: int = 1 << 20) -> str | None: ...
    def glob(self, pattern: str) -> list[str]: ...
    def machine(self) -> str: ...


class RealSystem:
    def run(self, argv: list[str], timeout: float = 10.0) -> Ran:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout, check=False)
        except FileNotFoundError:
            return Ran(NOT_FOUND, "", f"{argv[0]}: command not found")
        except PermissionError:
            return Ran(126, "", f"{argv[0]}: permission denied")
        except subprocess.TimeoutExpired:
            return Ran(124, "", f"{argv[0]} did not answer within {timeout:.0f} s")
        return Ran(done.returncode, done.stdout, done.stderr)

    def read(self, path: str, limit: int = 1 << 20) -> str | None:
        """A small regular file's text, or None (missing, unreadable, not a regular file: never blocks)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                return handle.read(limit).decode("utf-8", errors="replace")
            except OSError:
                return None

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern))

    def machine(self) -> str:
        return platform.machine()
