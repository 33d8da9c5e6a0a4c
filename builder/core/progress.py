"""What a person sees while one image builds: BuildKit's step headers, and inside a long step (the multi-GB
pip install takes minutes) how long it has run and how many bytes of wheels pip has started downloading.

Two modes. `live` (a terminal, NO_COLOR unset, TERM not "dumb"): one status line under the step header,
redrawn in place every couple of seconds. `lines` (a pipe, a CI log, a file): a plain line every 30 s while
a step runs, so a log shows the build is alive without thousands of redraws. No colour in either mode.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from enum import StrEnum
from types import TracebackType

Log = Callable[[str], None]
Clock = Callable[[], float]

_DOWNLOAD = re.compile(r"Downloading \S+ \(([\d.]+) ?([kKMG]i?B)\)")  # pip: "(915.2 MB)"; uv: "(846.8MiB)"
_UNITS = {"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


class Mode(StrEnum):
    LIVE = "live"
    LINES = "lines"


def mode_for(stream: object = None, env: dict[str, str] | None = None) -> Mode:
    env = dict(os.environ) if env is None else env
    stream = sys.stdout if stream is None else stream
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return Mode.LIVE if tty and "NO_COLOR" not in env and env.get("TERM") != "dumb" else Mode.LINES


def is_step(line: str) -> bool:
    """BuildKit's plain-progress step header, e.g. `#12 [venv 3/5] RUN pip install ...` (not its DONE line)."""
    return line.startswith("#") and " [" in line and "] " in line and "DONE" not in line


def downloaded(line: str) -> int:
    match = _DOWNLOAD.search(line)
    return int(float(match[1]) * _UNITS[match[2]]) if match else 0


def human_bytes(count: int) -> str:
    return f"{count / 1e9:.1f} GB" if count >= 1e8 else f"{count / 1e6:.0f} MB"


def human_time(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class BuildProgress:
    """Feed it every line of one target's build (`feed`); a ticker thread calls `tick`."""

    def __init__(
        self,
        name: str,
        log: Log,
        mode: Mode,
        *,
        write: Callable[[str], None] | None = None,
        clock: Clock = time.monotonic,
        interval: float | None = None,
    ) -> None:
        self.name, self.log, self.mode, self.clock = name, log, mode, clock
        self.write = write or _write_stdout
        self.interval = interval if interval is not None else (2.0 if mode is Mode.LIVE else 30.0)
        self.step = ""
        self.step_started = self.started = clock()
        self.bytes = 0
        self.last_report = self.started
        self._drawn = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def feed(self, line: str) -> None:
        with self._lock:
            self.bytes += downloaded(line)
            if not is_step(line):
                return
            self.step = " ".join(line.split())
            self.step_started = self.last_report = self.clock()
            self._clear()
            self.log(f"[{self.name}] {_cut(self.step)}")

    def tick(self) -> None:
        with self._lock:
            now = self.clock()
            if not self.step or now - self.last_report < self.interval:
                return
            self.last_report = now
            status = f"[{self.name}]   ... {human_time(now - self.step_started)} in this step"
            status += f", {human_time(now - self.started)} in all"
            if self.bytes:
                status += f", {human_bytes(self.bytes)} of downloads started"
            if self.mode is Mode.LIVE:
                self.write(f"\r\033[K{status}")
                self._drawn = True
            else:
                self.log(status)

    def _clear(self) -> None:
        if self._drawn:
            self.write("\r\033[K")
            self._drawn = False

    def __enter__(self) -> BuildProgress:
        self._thread = threading.Thread(target=self._run, name=f"progress-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()

    def _run(self) -> None:
        while not self._stop.wait(min(self.interval, 1.0)):
            self.tick()


def _cut(text: str, width: int = 100) -> str:
    return text[:width] + ("..." if len(text) > width else "")


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
