"""Processes a check starts of its own (torchrun and its ranks, the determinism runs): started in a session of
their own, their output in a file, waited for inside a budget, killed (the whole group) when they outlive it.

A check that starts processes must finish before the runner's timeout kills its worker: the budget is a part of
the check's timeout (times --timeout-scale), so a hang is reported by the check, with the hung process's last
words, rather than as a bare "timed out".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
GRACE = 3.0  # seconds between SIGTERM (torchrun then stops its ranks) and SIGKILL of the group


def die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies, so a hung helper cannot outlive the suite."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def suite_command(*args: str) -> list[str]:
    """This interpreter running this suite's directory in one of its helper modes (`--smoke-helper NAME CONFIG`)."""
    return [sys.executable, PACKAGE_DIR, *args]


@dataclass
class Started:
    proc: subprocess.Popen[bytes]
    log: str  # its stdout and stderr together


@dataclass
class Finished:
    code: int | None  # None: it outlived the budget and was killed
    log: str
    seconds: float


def start(argv: list[str], log: str, env: dict[str, str] | None = None) -> Started:
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            argv,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509  (no threads run in the worker when it starts one)
        )
    return Started(proc, log)


def wait_all(started: list[Started], budget: float) -> list[Finished]:
    """Wait for every process until `budget` seconds have passed; then stop those still running."""
    begin = time.monotonic()
    deadline = begin + budget
    done: list[Finished] = []
    for item in started:
        try:
            code: int | None = item.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stop(item.proc)
            code = None
        done.append(Finished(code, item.log, time.monotonic() - begin))
    return done


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group (torchrun stops its ranks on it), then SIGKILL to whatever is left."""
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def last_words(path: str) -> str | None:
    """The last non-empty line a process wrote to its log (None: it wrote nothing)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError:
        return None
    return lines[-1] if lines else None


def tail(path: str, count: int = 3) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-count:])
