"""The seam between the host probe and the machine: commands, files, the CPU. Tests replace it with recorded
outputs of real machines; nothing else in builder/host touches the system."""

from __future__ import annotations

import glob
import os
import platform
import stat
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
        try:
            # a folder or a FIFO named where a file is expected (daemon.json, a CDI spec) is no file to read
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return _read_up_to(fd, limit).decode("utf-8", errors="replace")
        except OSError:
            return None
        finally:
            os.close(fd)

    def glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(pattern))

    def machine(self) -> str:
        return platform.machine()


def _read_up_to(fd: int, limit: int) -> bytes:
    """Up to limit bytes: a /proc file may answer a read with less than it holds."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
