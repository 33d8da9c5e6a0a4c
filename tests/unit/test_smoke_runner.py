"""builder/smoke/runner.py: checks run in a worker process, each with its own timeout.

Unlike the rest of tests/unit, these tests start processes: a hang or a dead interpreter can only be
survived by a real worker. The worker (`python builder/smoke --worker ...`) imports the fake modules
from stubs on PYTHONPATH (fake_torch.write_stubs); --timeout-scale-like scaling keeps hangs short.
Every worker started is recorded and killed at teardown if a test left one alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_torch import FakeImage, Gpu, manifest, write_stubs
from smoke_kit import CHECKS, context

from builder.smoke import cli, runner
from builder.smoke.framework import FAIL, PASS, SKIP, Check, Context, Result
from builder.smoke.runner import _groups, load_checks, run_all

SCALE = 0.02  # a 60 s check times out after 1.2 s
VERSIONS = ["version.torch", "version.torchvision", "version.torchaudio", "version.cuda", "version.python"]


class Workers:
    """Records the worker processes the runner starts; refuses to start more than `limit`."""

    def __init__(self, limit: int = 40) -> None:
        self.started: list[subprocess.Popen[Any]] = []
        self.limit = limit
        self._popen = subprocess.Popen

    def __call__(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        if len(self.started) >= self.limit:
            raise RuntimeError(f"the runner started more than {self.limit} workers")
        proc = self._popen(*args, **kwargs)
        self.started.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Workers]:
    found = Workers()
    monkeypatch.setattr(subprocess, "Popen", found)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no nvcc or nvidia-smi from the host reaches the checks
    yield found
    found.kill_all()


Image = Callable[[FakeImage], None]


@pytest.fixture
def image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Image:
    def install(fake: FakeImage) -> None:
        monkeypatch.setenv("PYTHONPATH", write_stubs(tmp_path / "stubs", fake))

    return install


def run(names: list[str], ctx: Context, scale: float = SCALE) -> list[Result]:
    return run_all([CHECKS[n] for n in names], ctx, scale)


def statuses(results: list[Result]) -> list[tuple[str, str]]:
    return [(r.name, r.status) for r in results]


def test_one_worker_runs_every_check_in_order(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage())
    ctx = context(tmp_path)
    results = run(VERSIONS, ctx)
    assert statuses(results) == [(name, PASS) for name in VERSIONS]
    assert len(workers.started) == 1
    assert ctx.observed["torch"] == "2.14.1+cu130"  # facts the worker read come back to the parent


def test_every_registered_check_gets_a_result(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage())
    results = run(list(CHECKS), context(tmp_path))
    assert [r.name for r in results] == list(CHECKS)
    by_name = {r.name: r for r in results}
    assert by_name["gpu.devices"].status == SKIP  # no GPU: skipped, never passed
    # model.py needs the real torch (nn, optim): the fake cannot train, and that is reported, not lost
    assert by_name["train.cpu"].status == FAIL
    assert by_name["train.cpu"].message.startswith("ImportError: cannot import name 'nn' from 'torch'")
    # The no-GPU checks share one worker, which then finds no GPU: the same reason skips every GPU check
    # without a worker of its own.
    assert len(workers.started) == 1
    assert {(r.status, r.message) for r in results if CHECKS[r.name].gpu} == {(SKIP, "no GPU visible")}


@pytest.mark.parametrize(
    ("fake", "why"),
    [(FakeImage(), "no GPU visible"), (FakeImage(cuda=None, cudnn=None), "CPU build of torch")],
)
def test_the_no_gpu_worker_says_why_the_gpu_checks_are_skipped(
    workers: Workers, image: Image, tmp_path: Path, fake: FakeImage, why: str
) -> None:
    image(fake)
    results = run([*VERSIONS, "gpu.devices", "gpu.tf32"], context(tmp_path))
    assert [(r.name, r.status, r.message) for r in results[-2:]] == [
        ("gpu.devices", SKIP, why),
        ("gpu.tf32", SKIP, why),
    ]
    assert len(workers.started) == 1


@pytest.mark.parametrize(
    ("fake", "require_gpu"),
    [
        (FakeImage(gpus=(Gpu(),)), False),  # a GPU: each GPU check in a worker of its own
        (FakeImage(), True),  # --require-gpu: each fails in its own worker, as without the probe
    ],
)
def test_with_a_gpu_or_require_gpu_the_gpu_checks_get_their_own_workers(
    workers: Workers, image: Image, tmp_path: Path, fake: FakeImage, require_gpu: bool
) -> None:
    image(fake)
    results = run([*VERSIONS, "gpu.devices", "gpu.tf32"], context(tmp_path, require_gpu=require_gpu))
    assert [r.status for r in results[-2:]] != [SKIP, SKIP]
    assert len(workers.started) == 3


def test_a_probe_that_hangs_leaves_the_gpu_checks_to_their_own_workers(
    workers: Workers, image: Image, tmp_path: Path
) -> None:
    # torch.cuda.is_available() never returns (a driver that hangs): the probe is given up after its timeout,
    # every no-GPU check keeps its result, and gpu.devices, in a worker of its own, times out by name.
    image(FakeImage(hang_in_cuda_check=True))
    start = time.monotonic()
    results = run([*VERSIONS, "gpu.devices"], context(tmp_path))
    assert statuses(results) == [*((name, PASS) for name in VERSIONS), ("gpu.devices", FAIL)]
    assert results[-1].message == "timed out after 1 s (hung; the worker was killed)"
    assert time.monotonic() - start < 15
    assert len(workers.started) == 2
    assert all(proc.returncode is not None for proc in workers.started)


def test_each_gpu_check_runs_in_a_fresh_worker_of_its_own(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage())
    gpu = [name for name, c in CHECKS.items() if c.gpu]
    results = run(gpu, context(tmp_path, require_gpu=True))  # failing, not skipping: every check runs
    assert {r.status for r in results} == {FAIL}
    assert len(workers.started) == len(gpu)


def test_gpu_checks_are_isolated_and_no_gpu_checks_share_a_worker() -> None:
    fake = [
        Check(name, lambda ctx: "", gpu, 1.0) for name, gpu in [("a", False), ("b", False), ("g1", True), ("g2", True)]
    ]
    assert _groups(fake) == [["a", "b"], ["g1"], ["g2"]]
    assert [c.gpu for c in load_checks()] == sorted(c.gpu for c in load_checks())  # no-GPU checks first


def test_a_hanging_check_times_out_by_name_and_a_fresh_worker_carries_on(
    workers: Workers, image: Image, tmp_path: Path
) -> None:
    image(FakeImage(hang_on_import=("torchaudio",)))
    start = time.monotonic()
    results = run(VERSIONS, context(tmp_path))
    assert statuses(results) == [
        ("version.torch", PASS),
        ("version.torchvision", PASS),
        ("version.torchaudio", FAIL),
        ("version.cuda", PASS),
        ("version.python", PASS),
    ]
    assert results[2].message == "timed out after 1 s (hung; the worker was killed)"
    assert 1.2 <= results[2].seconds < 10
    assert time.monotonic() - start < 15
    assert len(workers.started) == 2
    assert all(proc.returncode is not None for proc in workers.started)  # the hung one was killed and reaped


def test_each_check_has_its_own_timeout(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage(hang_on_import=("torchvision",)))
    results = run(["version.torchvision", "import.torchvision", "version.torch"], context(tmp_path))
    assert statuses(results) == [
        ("version.torchvision", FAIL),
        ("import.torchvision", FAIL),
        ("version.torch", PASS),
    ]
    assert [r.message.split(" (")[0] for r in results[:2]] == ["timed out after 1 s"] * 2
    assert len(workers.started) == 3


def test_a_hang_in_the_last_check_ends_the_run(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage(hang_on_import=("torchaudio",)))
    results = run(["version.torch", "version.torchaudio"], context(tmp_path))
    assert statuses(results) == [("version.torch", PASS), ("version.torchaudio", FAIL)]
    assert len(workers.started) == 1


@pytest.mark.parametrize(("how", "code"), [("exit", 3), ("segfault", -signal.SIGSEGV)])
def test_a_check_that_kills_the_interpreter_fails_alone(
    workers: Workers, image: Image, tmp_path: Path, how: str, code: int
) -> None:
    image(FakeImage(crash_on_import=(("torchvision", how),)))  # type: ignore[arg-type]
    results = run(VERSIONS, context(tmp_path))
    assert statuses(results) == [
        ("version.torch", PASS),
        ("version.torchvision", FAIL),
        ("version.torchaudio", PASS),
        ("version.cuda", PASS),
        ("version.python", PASS),
    ]
    assert results[1].message == f"the check crashed the Python process (exit code {code})"
    assert len(workers.started) == 2


def test_hangs_and_crashes_together(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage(hang_on_import=("torch",), crash_on_import=(("torchaudio", "exit"),)))
    results = run(["version.python", "version.torch", "version.torchaudio", "version.os"], context(tmp_path))
    assert statuses(results) == [
        ("version.python", PASS),
        ("version.torch", FAIL),
        ("version.torchaudio", FAIL),
        ("version.os", PASS),
    ]
    assert "timed out" in results[1].message and "crashed" in results[2].message
    assert len(workers.started) == 3


def test_stray_output_of_a_check_does_not_corrupt_the_protocol(
    workers: Workers, image: Image, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    image(FakeImage(chatter_on_import='{"event": "result", "oops": true}'))
    results = run(VERSIONS, context(tmp_path))
    assert statuses(results) == [(name, PASS) for name in VERSIONS]
    assert '"oops": true' in capfd.readouterr().err  # the worker's stdout went to stderr


class LateReader(selectors.DefaultSelector):
    """A busy parent: it reads a while after the pipe became readable, so lines pile up."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        if ready:
            time.sleep(0.3)
        return ready


def test_a_parent_that_reads_late_still_times_the_right_check(
    workers: Workers, image: Image, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker writes "result" of one check and "start" of the next back to back; when both are
    # in the pipe, the parent must still see the next check start (and time it), not wait forever.
    monkeypatch.setattr(selectors, "DefaultSelector", LateReader)
    image(FakeImage(hang_on_import=("torchaudio",)))
    done: list[list[Result]] = []
    thread = threading.Thread(
        target=lambda: done.append(run(["version.torch", "version.torchaudio"], context(tmp_path)))
    )
    thread.start()
    thread.join(timeout=20)
    if thread.is_alive():
        workers.kill_all()  # unblocks the runner
        thread.join()
        pytest.fail("the runner waited forever on a check it never saw start")
    assert statuses(done[0]) == [("version.torch", PASS), ("version.torchaudio", FAIL)]


def test_a_worker_that_cannot_start_fails_the_checks_instead_of_looping(
    workers: Workers, image: Image, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image(FakeImage())
    monkeypatch.setattr(runner, "_PACKAGE_DIR", str(tmp_path / "no-such-suite"))
    results = run(["version.torch", "version.python"], context(tmp_path))
    assert statuses(results) == [("version.torch", FAIL), ("version.python", FAIL)]
    assert results[0].message.startswith("the worker exited with code 2 before running the check")
    assert len(workers.started) == 2


def test_the_worker_runs_under_the_parent_interpreter(workers: Workers, image: Image, tmp_path: Path) -> None:
    image(FakeImage())
    run(["version.python"], context(tmp_path))
    argv = workers.started[0].args
    assert isinstance(argv, list) and argv[:3] == [sys.executable, runner._PACKAGE_DIR, "--worker"]


def test_the_command_line_end_to_end(
    workers: Workers, image: Image, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image(FakeImage(hang_on_import=("torchaudio",)))
    expect, report = tmp_path / "manifest.json", tmp_path / "smoke.json"
    expect.write_text(json.dumps(manifest()))
    argv = ["--expect", str(expect), "--only", "version.", "--only", "gpu.dev", "--timeout-scale", "0.02"]
    assert cli.main([*argv, "--json", str(report)]) == 1
    checks = json.loads(report.read_text())["checks"]
    assert [(c["name"], c["status"]) for c in checks] == [
        ("version.torch", PASS),
        ("version.torchvision", PASS),
        ("version.torchaudio", FAIL),
        ("version.cuda", PASS),
        ("version.cudnn", PASS),
        ("version.nccl", PASS),
        ("version.python", PASS),
        ("version.os", PASS),
        ("gpu.devices", SKIP),
    ]
    assert checks[2]["message"] == "timed out after 1 s (hung; the worker was killed)"
    assert capsys.readouterr().out.splitlines()[-1] == "7 passed, 1 failed, 1 skipped"
