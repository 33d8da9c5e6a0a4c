"""Build progress: step headers as before, and inside a long step its elapsed time and downloaded bytes;
a redrawn status line on a terminal, plain lines elsewhere (NO_COLOR, TERM=dumb, a pipe)."""

from __future__ import annotations

import io
import time

import pytest

from builder.core.progress import BuildProgress, Mode, downloaded, human_bytes, mode_for

STEP = "#12 [venv 3/5] RUN --mount=type=cache,target=/root/.cache/pip pip install -r constraints.txt torch==2.14.1"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("line", "count"),
    [
        ("#12 41.2   Downloading https://files.pythonhosted.org/p/torch-2.14.1-cp311.whl (915.2 MB)", 915_200_000),
        ("#12 3.0 Downloading nvidia_cudnn_cu13-9.13.0.50-py3-none-manylinux_2_27_x86_64.whl (707 kB)", 707_000),
        ("#12 5.1  Downloading torch (846.8MiB)", int(846.8 * (1 << 20))),  # uv
        ("#12 5.1  Downloaded torch", 0),
        ("#12 1.0 Collecting torch==2.14.1", 0),
    ],
)
def test_pip_and_uv_download_sizes_are_read(line: str, count: int) -> None:
    assert downloaded(line) == count


def test_lines_mode_reports_a_long_step_every_interval_with_time_and_bytes() -> None:
    clock, logged = Clock(), list[str]()
    progress = BuildProgress("runtime", logged.append, Mode.LINES, clock=clock, interval=30)
    progress.feed(STEP)
    progress.feed("#12 41.2 Downloading https://x/torch-2.14.1.whl (915.2 MB)")
    clock.now += 29
    progress.tick()
    clock.now += 2
    progress.tick()
    progress.tick()  # not again before another interval
    clock.now += 60
    progress.feed("#12 90.0 Downloading https://x/nvidia_cublas.whl (1.2 GB)")
    progress.tick()

    assert logged[0] == "[runtime] " + STEP[:100] + "..."
    assert logged[1:] == [
        "[runtime]   ... 31s in this step, 31s in all, 0.9 GB of downloads started",
        "[runtime]   ... 1m31s in this step, 1m31s in all, 2.1 GB of downloads started",
    ]


def test_a_new_step_restarts_the_step_clock_not_the_total() -> None:
    clock, logged = Clock(), list[str]()
    progress = BuildProgress("devel", logged.append, Mode.LINES, clock=clock, interval=30)
    progress.feed(STEP)
    clock.now += 100
    progress.feed("#13 [toolchain 1/2] RUN apt-get install -y build-essential")
    clock.now += 45
    progress.tick()
    assert logged[-1] == "[devel]   ... 45s in this step, 2m25s in all"


def test_nothing_is_reported_before_the_first_step_or_for_done_lines() -> None:
    clock, logged = Clock(), list[str]()
    progress = BuildProgress("runtime", logged.append, Mode.LINES, clock=clock, interval=30)
    progress.feed("#12 DONE 310.2s")
    clock.now += 100
    progress.tick()
    assert logged == []


def test_live_mode_redraws_one_status_line_and_clears_it_before_the_next_step() -> None:
    clock, logged, drawn = Clock(), list[str](), list[str]()
    progress = BuildProgress("runtime", logged.append, Mode.LIVE, clock=clock, write=drawn.append, interval=2)
    progress.feed(STEP)
    clock.now += 3
    progress.tick()
    clock.now += 3
    progress.tick()
    progress.feed("#13 [runtime 1/3] COPY --from=venv /opt/venv /opt/venv")

    assert drawn == [
        "\r\033[K[runtime]   ... 3s in this step, 3s in all",
        "\r\033[K[runtime]   ... 6s in this step, 6s in all",
        "\r\033[K",
    ]
    assert logged == [
        "[runtime] " + STEP[:100] + "...",
        "[runtime] #13 [runtime 1/3] COPY --from=venv /opt/venv /opt/venv",
    ]


def test_the_ticker_thread_stops_and_leaves_no_status_line_behind() -> None:
    drawn: list[str] = []
    with BuildProgress("runtime", list[str]().append, Mode.LIVE, write=drawn.append, interval=0.01) as progress:
        progress.feed(STEP)
        for _ in range(200):
            if drawn:
                break
            time.sleep(0.01)
    assert drawn and drawn[-1] == "\r\033[K"


@pytest.mark.parametrize(
    ("stream", "env", "mode"),
    [
        (Tty(), {"TERM": "xterm"}, Mode.LIVE),
        (Tty(), {"TERM": "xterm", "NO_COLOR": "1"}, Mode.LINES),
        (Tty(), {"TERM": "dumb"}, Mode.LINES),
        (io.StringIO(), {"TERM": "xterm"}, Mode.LINES),
    ],
)
def test_live_only_on_a_terminal_that_asked_for_nothing_plain(stream: object, env: dict[str, str], mode: Mode) -> None:
    assert mode_for(stream, env) is mode


def test_bytes_read_as_a_person_would() -> None:
    assert (human_bytes(707_000), human_bytes(915_200_000), human_bytes(5_790_000_000)) == ("1 MB", "0.9 GB", "5.8 GB")
