"""Run checks in worker processes, each with its own timeout; a hang or crash fails that check only.

The no-GPU checks share a worker that runs them one after another and reports over a pipe. Every GPU
check gets a fresh worker of its own: a sticky CUDA error, a leaked setting or a half-initialised
communicator in one check cannot fail the next. If a check outlives its timeout, its worker is killed,
the check is recorded as failed with its name, and a fresh worker carries on with the remaining checks.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict
from typing import IO, Any

from .expect import Expectations
from .framework import CPU_BUILD, FAIL, NO_GPU, PASS, REGISTRY, SKIP, Check, Context, Failed, Result, Skipped
from .procs import die_with_parent

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# Import order is run order within each kind; the no-GPU checks run first, then the GPU ones.
_MODULES = (
    "checks_cpu",
    "checks_data",
    "checks_gpu",
    "checks_compile",
    "checks_gpu_perf",
    "checks_nccl",
    "checks_ddp",
    "checks_determinism",
    "checks_profiler",
    "checks_onnx",
)


def load_checks() -> list[Check]:
    for name in _MODULES:
        importlib.import_module(f".{name}", __package__)
    return sorted(REGISTRY, key=lambda c: c.gpu)


def run_one(item: Check, ctx: Context) -> Result:
    start = time.perf_counter()
    try:
        message, status = item.func(ctx), PASS
    except Skipped as exc:
        message, status = str(exc), SKIP
    except Failed as exc:
        message, status = str(exc), FAIL
    except Exception as exc:  # a check that breaks is a failure with its own message
        message, status = f"{type(exc).__name__}: {exc}".strip(), FAIL
        traceback.print_exc(file=sys.stderr)
    return Result(item.name, status, message, time.perf_counter() - start)


def worker(config: dict[str, Any], protocol: IO[str]) -> None:
    """Inside the worker: run the named checks, one JSON line per event."""
    die_with_parent()  # the suite's process dies: so does this worker, a hung check cannot outlive it
    ctx = Context(
        expect=Expectations.from_dict(config["expect"]),
        arch=config["arch"],
        require_gpu=config["require_gpu"],
        small=bool(config.get("small")),
        timeout_scale=float(config.get("timeout_scale", 1.0)),
    )
    by_name = {c.name: c for c in load_checks()}
    for name in config["names"]:
        protocol.write(json.dumps({"event": "start", "name": name}) + "\n")
        protocol.flush()
        result = run_one(by_name[name], ctx)
        protocol.write(json.dumps({"event": "result", "result": asdict(result), "observed": ctx.observed}) + "\n")
        protocol.flush()


def run_all(checks: list[Check], ctx: Context, scale: float = 1.0) -> list[Result]:
    """In the parent: drive workers until every check has a result (each GPU check in a worker of its own)."""
    timeouts = {c.name: c.timeout * scale for c in checks}
    results: list[Result] = []
    gpu = {c.name for c in checks if c.gpu}
    for group in _groups(checks):
        skipped = [r for r in results if r.name in gpu and r.status == SKIP and r.message in (NO_GPU, CPU_BUILD)]
        if group[0] in gpu and skipped:  # the same reason holds for every GPU check: no worker to start
            results.append(Result(group[0], SKIP, skipped[0].message, 0.0))
            continue
        pending = list(group)
        while pending:
            done = _drive_worker(pending, timeouts, ctx)
            results += done
            finished = {r.name for r in done}
            pending = [name for name in pending if name not in finished]
    return results


def _groups(checks: list[Check]) -> list[list[str]]:
    """Runs of no-GPU checks share a worker; a GPU check is a group of its own."""
    groups: list[tuple[bool, list[str]]] = []
    for item in checks:
        if item.gpu or not groups or groups[-1][0]:
            groups.append((item.gpu, [item.name]))
        else:
            groups[-1][1].append(item.name)
    return [names for _, names in groups]


def _drive_worker(names: list[str], timeouts: dict[str, float], ctx: Context) -> list[Result]:
    config = {
        "expect": ctx.expect.to_dict(),
        "arch": ctx.arch,
        "require_gpu": ctx.require_gpu,
        "small": ctx.small,
        "timeout_scale": ctx.timeout_scale,
        "names": names,
    }
    proc = subprocess.Popen(
        [sys.executable, _PACKAGE_DIR, "--worker", json.dumps(config)],
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered bytes: readline() takes one line off the pipe and select() sees the rest
        start_new_session=True,
    )
    assert proc.stdout is not None
    results: list[Result] = []
    current, deadline, started = None, 0.0, 0.0
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        while True:
            wait = max(0.0, deadline - time.monotonic()) if current else None
            if not selector.select(timeout=wait):
                _kill(proc)
                results.append(
                    Result(
                        current or "?",
                        FAIL,
                        f"timed out after {timeouts[current or '']:.0f} s (hung; the worker was killed)",
                        time.monotonic() - started,
                    )
                )
                return results
            line = proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            if event["event"] == "start":
                current, started = event["name"], time.monotonic()
                deadline = started + timeouts[event["name"]]
            else:
                results.append(Result(**event["result"]))
                ctx.observed.update(event["observed"])
                current = None
    finally:
        selector.close()
    code = proc.wait()
    if current is not None:
        results.append(
            Result(
                current, FAIL, f"the check crashed the Python process (exit code {code})", time.monotonic() - started
            )
        )
    elif not results:  # it died before its first check: fail that one, or run_all would start workers forever
        results.append(Result(names[0], FAIL, f"the worker exited with code {code} before running the check", 0.0))
    return results


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
