"""Run checks in worker processes, each with its own timeout; a hang or crash fails that check only.

The no-GPU checks share a worker that runs them one after another and reports over a pipe (torch is imported
once for all of them). Every GPU check gets a fresh worker of its own: a sticky CUDA error, a leaked setting or
a half-initialised communicator in one check cannot fail the next. If a check outlives its timeout, its worker
is killed, the check is recorded as failed with its name, and a fresh worker carries on with the remaining
checks. After its last check the no-GPU worker asks whether the GPU checks would all be skipped (a CPU build of
torch, no GPU visible): then they are, for that reason, without a worker started only to import torch and say so.
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

GPU_PROBE = "(GPU probe)"  # the no-GPU worker's last step: why every GPU check would be skipped, if they would
PROBE_TIMEOUT = 60.0  # torch.cuda.is_available() with a broken driver may hang: then the GPU checks' workers run

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# Import order is run order within each kind; the no-GPU checks run first, then the GPU ones.
_MODULES = (
    "checks_hygiene",  # first: what it looks for in /tmp is the image's, not what the other checks leave there
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
    "checks_notebook",
)


def load_checks() -> list[Check]:
    for name in _MODULES:
        importlib.import_module(f".{name}", __package__)
    return sorted(REGISTRY, key=lambda c: c.gpu)


def unknown_prefix(prefixes: list[str] | tuple[str, ...]) -> str | None:
    """The first --only prefix that names no check: empty (it starts every name: the whole suite would run as if
    --only were not given) or starting no check's name (a typo: no check would run, and the run would pass)."""
    names = [c.name for c in load_checks()]
    return next((p for p in prefixes if not p or not any(name.startswith(p) for name in names)), None)


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
        accepted=dict(config.get("accepted") or {}),
    )
    by_name = {c.name: c for c in load_checks()}
    for name in config["names"]:
        _say(protocol, {"event": "start", "name": name})
        result = run_one(by_name[name], ctx)
        _say(protocol, {"event": "result", "result": asdict(result), "observed": ctx.observed})
    if config.get("probe_gpu"):
        from .checks_gpu import no_gpu_reason

        _say(protocol, {"event": "start", "name": GPU_PROBE})
        _say(protocol, {"event": "gpu", "skip": no_gpu_reason(ctx)})


def _say(protocol: IO[str], event: dict[str, Any]) -> None:
    protocol.write(json.dumps(event) + "\n")
    protocol.flush()


def run_all(checks: list[Check], ctx: Context, scale: float = 1.0) -> list[Result]:
    """In the parent: drive workers until every check has a result (each GPU check in a worker of its own)."""
    timeouts = {c.name: c.timeout * scale for c in checks}
    timeouts[GPU_PROBE] = PROBE_TIMEOUT * scale
    results: list[Result] = []
    gpu = {c.name for c in checks if c.gpu}
    probe: dict[str, str | None] = {"skip": None}
    for group in _groups(checks):
        skipped = [
            r.message for r in results if r.name in gpu and r.status == SKIP and r.message in (NO_GPU, CPU_BUILD)
        ]
        reason = probe["skip"] or (skipped[0] if skipped else None)
        if group[0] in gpu and reason:  # the same reason holds for every GPU check: no worker to start
            results.append(Result(group[0], SKIP, reason, 0.0))
            continue
        pending = list(group)
        while pending:
            shared = group[0] not in gpu
            done = _drive_worker(pending, timeouts, ctx, probe if gpu and shared else None, shared=shared)
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


def _drive_worker(
    names: list[str],
    timeouts: dict[str, float],
    ctx: Context,
    probe: dict[str, str | None] | None = None,
    *,
    shared: bool = False,
) -> list[Result]:
    """One worker for `names`, in order; with `probe`, it then says why the GPU checks would be skipped, if so."""
    proc = _start_worker(names, ctx, probe is not None, shared)
    results: list[Result] = []
    current, started, hung = _follow(proc, timeouts, ctx, probe, results)
    if current == GPU_PROBE:  # every check has its result; a probe that hung or died leaves it to the GPU workers
        _kill(proc)
        return results
    if current is not None and hung:
        _kill(proc)
        message = f"timed out after {timeouts[current]:.0f} s (hung; the worker was killed)"
        return [*results, Result(current, FAIL, message, time.monotonic() - started)]
    code = proc.wait()
    if current is not None:
        message = f"the check crashed the Python process (exit code {code})"
        results.append(Result(current, FAIL, message, time.monotonic() - started))
    elif not results:  # it died before its first check: fail that one, or run_all would start workers forever
        results.append(Result(names[0], FAIL, f"the worker exited with code {code} before running the check", 0.0))
    return results


def _start_worker(names: list[str], ctx: Context, probe_gpu: bool, shared: bool) -> subprocess.Popen[bytes]:
    config = {
        "expect": ctx.expect.to_dict(),
        "arch": ctx.arch,
        "require_gpu": ctx.require_gpu,
        "small": ctx.small,
        "timeout_scale": ctx.timeout_scale,
        "accepted": ctx.accepted,
        "names": names,
        "probe_gpu": probe_gpu,
    }
    return subprocess.Popen(
        [sys.executable, _PACKAGE_DIR, "--worker", json.dumps(config)],
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered bytes: readline() takes one line off the pipe and select() sees the rest
        start_new_session=True,
        env=_shared_env() if shared else None,
    )


def _shared_env() -> dict[str, str]:
    """The no-GPU worker's environment: OpenMP threads that wait sleep rather than spin (unless the user chose).
    torch's CPU ops on the checks' small tensors mostly wait at OpenMP's barriers; spinning there, 2 threads on 2 CPUs
    shared with other work took 20-50 s for train.cpu's 16 steps, sleeping 2-5 s and 1 thread 1 s (load 30, torch
    2.13). The threads still run the parallel regions; the GPU checks' workers keep the user's environment."""
    return dict({"OMP_WAIT_POLICY": "PASSIVE"}, **os.environ)


def _follow(
    proc: subprocess.Popen[bytes],
    timeouts: dict[str, float],
    ctx: Context,
    probe: dict[str, str | None] | None,
    results: list[Result],
) -> tuple[str | None, float, bool]:
    """Read the worker's events into `results` until its pipe closes or a step outlives its timeout; returns
    the step under way then (None: between checks), when it started, and whether it outlived its timeout."""
    assert proc.stdout is not None
    current: str | None = None
    deadline = started = 0.0
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    try:
        while True:
            wait = max(0.0, deadline - time.monotonic()) if current else None
            if not selector.select(timeout=wait):
                return current, started, True  # the worker is still running
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                return current, started, False
            event = json.loads(line)
            if event["event"] == "start":
                current, started = event["name"], time.monotonic()
                deadline = started + timeouts[current]
                continue
            if event["event"] == "gpu" and probe is not None:
                probe["skip"] = event["skip"]
            elif event["event"] == "result":
                results.append(Result(**event["result"]))
                ctx.observed.update(event["observed"])
            current = None
    finally:
        selector.close()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
