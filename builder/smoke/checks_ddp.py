"""ddp.cpu and gpu.ddp: a DistributedDataParallel training run launched as users launch it, with torchrun.

`torchrun --standalone --nproc_per_node N` (or `python -m torch.distributed.run`, where no torchrun script is
beside the interpreter) starts N ranks of ddp_rank.py. Each trains the small ResNet on data of its own; the
check then holds them to what DDP promises: every rank starts from rank 0's weights (broadcast), the gradient
each rank applies is the mean of the ranks' own gradients, and after the last step every rank's parameters
are bit-identical (one digest) and the loss fell. On the CPU with gloo and 2 ranks; on the GPU with NCCL on
1, 2, 4, ... and all visible GPUs, with the time of a DDP step for each GPU count.

A rank that never joins (or hangs later) makes torchrun wait for ever: the check waits for a part of its own
timeout, stops torchrun and its ranks, and fails with each unfinished rank's last words (ddp_rank's log).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from . import procs
from .checks_gpu import _cuda, within
from .compat import cpu_threads
from .framework import Context, Failed, Skipped, check

CPU_TIMEOUT, GPU_TIMEOUT = 120.0, 600.0
BUDGET = 0.7  # of the check's (scaled) timeout: torchrun is stopped (procs.GRACE) in time for the check to say why
GRAD_TOLERANCE = 1e-5  # fp32: the mean of the local gradients against DDP's (bucketed, pre-divided) all_reduce
LOSS_FALL = 0.9  # the loss of the last step must be below 90 % of the first
# A few steps of the small ResNet at 16x16 and half width: 2 ranks finish in seconds on 2 CPUs.
CPU_RUN = {"steps": 6, "warmup": 2, "batch": 8, "size": 16, "width": 16, "lr": 0.05}
GPU_RUN = {"steps": 25, "warmup": 5, "batch": 64, "size": 32, "width": 32, "lr": 0.05}
SMALL_GPU_RUN = {"steps": 5, "warmup": 2, "batch": 8, "size": 16, "width": 16, "lr": 0.05}


def launcher() -> list[str]:
    """torchrun beside this interpreter (the venv's console script), else the module it runs."""
    beside = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if os.access(beside, os.X_OK):
        return [beside]
    return [sys.executable, "-m", "torch.distributed.run"]


def _distributed() -> Any:
    import torch

    try:
        import torch.distributed as dist
    except ImportError:
        raise Skipped(f"torch {torch.__version__} has no torch.distributed") from None
    if not dist.is_available():
        raise Failed(f"torch {torch.__version__} was built without distributed support: DDP cannot run")
    return dist


def launch(world: int, run: dict[str, Any], backend: str, device: str, budget: float) -> list[dict[str, Any]]:
    """Start torchrun with `world` ranks and return each rank's report; Failed with the ranks' last words."""
    with tempfile.TemporaryDirectory(prefix="torchyard-ddp-") as folder:
        threads = max(1, cpu_threads()[0] // world)
        config = dict(run, out=folder, backend=backend, device=device, timeout=budget * 0.75, threads=threads)
        # --local_addr: without it torchrun looks the container's hostname up, which a container without a network
        # (docker run --network none) cannot resolve: its agent then waits for ever and starts no rank.
        argv = [*launcher(), "--standalone", f"--nproc_per_node={world}", "--local_addr=127.0.0.1"]
        argv.append(procs.PACKAGE_DIR)
        argv += ["--smoke-helper", "ddp-rank", json.dumps(config)]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
        log = os.path.join(folder, "torchrun.log")
        finished = procs.wait_all([procs.start(argv, log, env)], budget)[0]
        return collect(folder, world, finished, budget)


def collect(folder: str, world: int, finished: procs.Finished, budget: float) -> list[dict[str, Any]]:
    reports: list[dict[str, Any]] = []
    missing: list[str] = []
    for rank in range(world):
        path = os.path.join(folder, f"rank{rank}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                reports.append(json.load(handle))
            continue
        words = procs.last_words(os.path.join(folder, f"rank{rank}.log"))
        missing.append(f"rank {rank}'s last words: {words!r}" if words else f"rank {rank} wrote nothing")
    if finished.code is None:
        raise Failed(
            f"the ranks did not finish within {budget:.0f} s (a rank that never joined, or hung; torchrun and its "
            f"ranks were stopped): " + "; ".join(missing or ["every rank had finished"])
        )
    if missing or finished.code != 0:
        said = procs.tail(finished.log)
        raise Failed(
            f"torchrun exited with code {finished.code}: "
            + "; ".join(missing or ["every rank wrote its report"])
            + (f" (torchrun: {said})" if said else "")
        )
    return reports


def verdict(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """What DDP promises, checked over the ranks' reports; Failed naming the first promise broken."""
    first = reports[0]
    world = len(reports)
    if any(r["broadcast"] != first["broadcast"] for r in reports):
        raise Failed("DDP did not broadcast rank 0's weights: the ranks started from different parameters")
    for r in reports:
        if not within(r["grad_error"], GRAD_TOLERANCE):
            raise Failed(
                f"rank {r['rank']}: DDP's gradient differs from the mean of the ranks' own gradients by "
                f"{r['grad_error']:.1e} of its largest value (tolerance {GRAD_TOLERANCE:g}): gradients not averaged"
            )
    if world > 1 and not max(r["grad_spread"] for r in reports) > 0:
        raise Failed("every rank computed the same gradient: the ranks did not train on different data")
    differ = [r["rank"] for r in reports if r["after"] != first["after"]]
    if differ:
        ranks = ", ".join(map(str, differ))
        raise Failed(
            f"after {len(first['losses'])} steps the parameters of rank(s) {ranks} differ from rank 0's "
            f"(digest {reports[differ[0]]['after'][:12]} against {first['after'][:12]}): the ranks desynchronised"
        )
    losses = first["losses"]
    if not losses[-1] < LOSS_FALL * losses[0]:
        raise Failed(
            f"the loss (mean over the ranks) went {losses[0]:.4f} -> {losses[-1]:.4f} in {len(losses)} steps; "
            f"expected below {LOSS_FALL:.0%} of the start"
        )
    starts = len({r["before"] for r in reports})
    return {
        "world": world,
        "steps": len(losses),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "grad_error": max(r["grad_error"] for r in reports),
        "different_starts": starts,
        "step_seconds": first["step_seconds"],
    }


def _how() -> str:
    return "torchrun" if len(launcher()) == 1 else "python -m torch.distributed.run"


@check("ddp.cpu", timeout=CPU_TIMEOUT)
def ddp_cpu(ctx: Context) -> str:
    """2 ranks on the CPU with gloo (the backend every torch build has)."""
    _distributed()
    budget = CPU_TIMEOUT * ctx.timeout_scale * BUDGET
    found = verdict(launch(2, CPU_RUN, "gloo", "cpu", budget))
    ctx.observed["ddp_cpu"] = found
    return (
        f"2 ranks (gloo, {_how()}): parameters bit-identical after {found['steps']} steps, from "
        f"{found['different_starts']} different starts; gradient = the ranks' mean ({found['grad_error']:.0e}); "
        f"loss {found['first_loss']:.3f} -> {found['last_loss']:.3f}"
    )


def gpu_counts(available: int) -> list[int]:
    """1, 2, 4, ... up to every visible GPU, and every visible GPU: how a DDP step scales."""
    counts, count = [], 1
    while count < available:
        counts.append(count)
        count *= 2
    return [*counts, available]


@check("gpu.ddp", gpu=True, timeout=GPU_TIMEOUT)
def ddp_gpu(ctx: Context) -> str:
    """NCCL across 1, 2, 4, ... and all visible GPUs; the step time for each count."""
    torch = _cuda(ctx)
    _distributed()
    run = SMALL_GPU_RUN if ctx.small else GPU_RUN
    counts = gpu_counts(torch.cuda.device_count())
    budget = GPU_TIMEOUT * ctx.timeout_scale * BUDGET / len(counts)
    found = {count: verdict(launch(count, run, "nccl", "cuda", budget)) for count in counts}
    seconds = {str(n): f["step_seconds"] for n, f in found.items()}
    rate = {str(n): run["batch"] * n / max(f["step_seconds"], 1e-9) for n, f in found.items()}
    scaling = {n: rate[n] / (int(n) * rate["1"]) for n in rate}
    ctx.observed["ddp_gpu"] = {
        "batch_per_gpu": run["batch"],
        "step_seconds": seconds,
        "images_per_second": rate,
        "scaling_efficiency": scaling,
        "runs": {str(n): f for n, f in found.items()},
    }
    steps = ", ".join(f"{n} GPU{'s' * (int(n) > 1)} {s * 1000:.1f} ms" for n, s in seconds.items())
    return (
        f"NCCL DDP ({_how()}): parameters bit-identical on every rank, gradients averaged, loss fell; "
        f"step time (batch {run['batch']} per GPU): {steps}; scaling at {counts[-1]}: {scaling[str(counts[-1])]:.2f}"
    )
