"""The one subprocess function: argv lists, streamed output, and clean interruption."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from builder.core.errors import Interrupted

# Children started by run_command and still running: a Ctrl-C in another thread (publish --jobs)
# stops them all through stop_all().
_RUNNING: set[subprocess.Popen[str]] = set()
_LOCK = threading.Lock()
# Set by stop_all(): long steps in other threads (smoke containers, pushes) check it and stop too.
_CANCELLED = threading.Event()


def check_cancelled(doing: str) -> None:
    """Raise Interrupted if a stop was asked for (Ctrl-C in publish's main thread)."""
    if _CANCELLED.is_set():
        raise Interrupted(f"interrupted before {doing}")


def reset_cancel() -> None:
    _CANCELLED.clear()


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    tail: tuple[str, ...]  # the last lines of output, for error messages


def run_command(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    on_line: Callable[[str], None] | None = None,
    keep: int = 40,
) -> Completed:
    """Run argv (no shell), streaming merged stdout/stderr line by line to `on_line`.

    On Ctrl-C the child's process group is stopped before Interrupted is raised, so no build keeps
    running in the background.
    """
    check_cancelled(f"running {argv[0]}")
    merged = dict(os.environ if env is None else env)
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=merged,
        start_new_session=True,
    )
    tail: list[str] = []
    assert proc.stdout is not None
    with _LOCK:
        _RUNNING.add(proc)
    try:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail = [*tail[-(keep - 1) :], line]
            if on_line is not None:
                on_line(line)
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise Interrupted(f"interrupted while running {argv[0]} {argv[1] if len(argv) > 1 else ''}".strip()) from None
    finally:
        with _LOCK:
            _RUNNING.discard(proc)
    return Completed(tuple(argv), code, tuple(tail))


def stop_all() -> int:
    """Stop every child run_command is waiting on, and ask every other long step to stop."""
    _CANCELLED.set()
    with _LOCK:
        running = list(_RUNNING)
    for proc in running:
        _stop(proc)
    return len(running)


def _stop(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue
