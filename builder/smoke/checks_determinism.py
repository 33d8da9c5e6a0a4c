"""determinism.cpu and gpu.determinism: the same seeded training, twice, in fresh processes, is bitwise equal.

Each run is a process of its own (`python <smoke dir> --smoke-helper determinism CONFIG`): it seeds torch, turns
on torch.use_deterministic_algorithms(True), cudnn.deterministic and turns cudnn.benchmark off (and, on the GPU,
is started with CUBLAS_WORKSPACE_CONFIG=:4096:8, which cuBLAS reads when it starts), trains the small ResNet for
a few steps and reports every loss (float.hex: exact) and a digest of the weights. The check compares the two
runs bit for bit. On the GPU a third run with torch's defaults (no determinism asked for) gives the cost of
determinism: its step time against the deterministic runs'.

What it cannot show: that another model, other shapes or other ops are deterministic (torch raises for ops
without a deterministic implementation only when they run), nor determinism across GPUs, drivers or releases.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from . import procs
from .checks_gpu import _cuda
from .compat import Timer, cpu_threads
from .framework import Context, Failed, Skipped, check

CPU_TIMEOUT, GPU_TIMEOUT = 120.0, 300.0
BUDGET = 0.7  # of the check's (scaled) timeout, leaving time to stop the runs (procs.GRACE)
CUBLAS = ":4096:8"  # cuBLAS's deterministic workspace setting (CUDA >= 10.2), as torch's documentation gives it
CPU_RUN = {"steps": 4, "warmup": 1, "batch": 8, "size": 16, "width": 16, "seed": 0}
GPU_RUN = {"steps": 20, "warmup": 5, "batch": 64, "size": 32, "width": 32, "seed": 0}
SMALL_GPU_RUN = {"steps": 4, "warmup": 1, "batch": 8, "size": 16, "width": 16, "seed": 0}


def run_child(config: dict[str, Any]) -> int:
    """In the fresh process: one seeded training run, reported to config["out"]."""
    procs.die_with_parent()
    import torch

    from .model import SmallResNet, digest

    device, deterministic = config["device"], bool(config["deterministic"])
    if device == "cpu":
        torch.set_num_threads(int(config["threads"]))
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(int(config["seed"]))
    model = SmallResNet(width=int(config["width"])).to(device)
    size, batch = int(config["size"]), int(config["batch"])
    images = torch.randn(batch, 3, size, size).to(device)
    labels = torch.randint(0, 10, (batch,)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = torch.zeros(int(config["steps"]), device=device)
    warmup = int(config["warmup"])
    for index in range(warmup):
        _step(torch, model, optimizer, images, labels, losses, index)
    with Timer(torch, device) as timer:
        for index in range(warmup, int(config["steps"])):
            _step(torch, model, optimizer, images, labels, losses, index)
    found = {
        "losses": [float(x).hex() for x in losses.tolist()],
        "weights": digest(model),
        "deterministic": bool(torch.are_deterministic_algorithms_enabled()),
        "cublas_workspace": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "threads": torch.get_num_threads(),
        "step_seconds": timer.seconds / max(1, int(config["steps"]) - warmup),
    }
    with open(config["out"], "w", encoding="utf-8") as handle:
        json.dump(found, handle)
    return 0


def _step(torch: Any, model: Any, optimizer: Any, images: Any, labels: Any, losses: Any, index: int) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    losses[index] = loss.detach()


def _torch() -> Any:
    import torch

    if not hasattr(torch, "use_deterministic_algorithms"):
        raise Skipped(f"torch {torch.__version__} has no torch.use_deterministic_algorithms (torch >= 1.8)")
    return torch


def runs(configs: list[dict[str, Any]], budget: float, together: bool) -> list[dict[str, Any]]:
    """Run each configuration in a fresh process (at once, or one after another) and read their reports."""
    with tempfile.TemporaryDirectory(prefix="torchyard-determinism-") as folder:
        for index, config in enumerate(configs):
            config["out"] = os.path.join(folder, f"run{index + 1}.json")
        logs = [os.path.join(folder, f"run{index + 1}.log") for index in range(len(configs))]
        commands = [procs.suite_command("--smoke-helper", "determinism", json.dumps(c)) for c in configs]
        env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=os.environ.get("CUBLAS_WORKSPACE_CONFIG", CUBLAS))
        if together:
            finished = procs.wait_all([procs.start(argv, log, env) for argv, log in zip(commands, logs)], budget)
        else:
            finished, share = [], budget / len(configs)
            for argv, log in zip(commands, logs):
                finished += procs.wait_all([procs.start(argv, log, env)], share)
        return [_report(index + 1, f, c["out"]) for index, (f, c) in enumerate(zip(finished, configs))]


def _report(number: int, finished: procs.Finished, path: str) -> dict[str, Any]:
    if finished.code is None:
        words = procs.last_words(finished.log)
        raise Failed(f"run {number} did not finish in {finished.seconds:.0f} s; its last words: {words!r}")
    if finished.code != 0 or not os.path.exists(path):
        raise Failed(f"run {number} exited with code {finished.code}: {procs.tail(finished.log)}")
    with open(path, encoding="utf-8") as handle:
        found: dict[str, Any] = json.load(handle)
    return found


def compare(first: dict[str, Any], second: dict[str, Any]) -> str:
    """Bitwise equality of two deterministic runs' losses and weights; Failed naming the first difference."""
    for number, run in ((1, first), (2, second)):
        if not run["deterministic"]:
            raise Failed(f"run {number}: torch.are_deterministic_algorithms_enabled() is False after turning it on")
    for step, (a, b) in enumerate(zip(first["losses"], second["losses"])):
        if a != b:
            raise Failed(
                f"the same seeded run gave different losses in two processes from step {step + 1}: "
                f"{float.fromhex(a)!r} against {float.fromhex(b)!r} (a non-deterministic op ran)"
            )
    if first["weights"] != second["weights"]:
        raise Failed(
            f"equal losses but different weights after {len(first['losses'])} steps (digest "
            f"{first['weights'][:12]} against {second['weights'][:12]}): a non-deterministic op ran"
        )
    losses = [float.fromhex(x) for x in first["losses"]]
    return f"losses and weights bitwise equal over {len(losses)} steps (loss {losses[0]:.4f} -> {losses[-1]:.4f})"


@check("determinism.cpu", timeout=CPU_TIMEOUT)
def determinism_cpu(ctx: Context) -> str:
    """Two fresh processes at once, the CPU's threads shared between them (the same count in each)."""
    _torch()
    threads = max(1, cpu_threads()[0] // 2)
    config = dict(CPU_RUN, device="cpu", deterministic=True, threads=threads)
    first, second = runs([dict(config), dict(config)], CPU_TIMEOUT * ctx.timeout_scale * BUDGET, together=True)
    said = compare(first, second)
    ctx.observed["determinism_cpu"] = {
        "steps": len(first["losses"]),
        "weights": first["weights"],
        "threads": threads,
        "threads_used": [first["threads"], second["threads"]],  # torch's own count in each run
    }
    return f"2 fresh processes, seed 0, {threads} thread(s) each: {said}"


@check("gpu.determinism", gpu=True, timeout=GPU_TIMEOUT)
def determinism_gpu(ctx: Context) -> str:
    """Two deterministic runs, then one with torch's defaults: bitwise equality, and what determinism costs."""
    _cuda(ctx)
    _torch()
    run = dict(SMALL_GPU_RUN if ctx.small else GPU_RUN, device="cuda", threads=1)
    configs = [dict(run, deterministic=True), dict(run, deterministic=True), dict(run, deterministic=False)]
    first, second, default = runs(configs, GPU_TIMEOUT * ctx.timeout_scale * BUDGET, together=False)
    if first["cublas_workspace"] is None:
        raise Failed("CUBLAS_WORKSPACE_CONFIG did not reach the run: cuBLAS is not deterministic without it")
    said = compare(first, second)
    cost = first["step_seconds"] / max(default["step_seconds"], 1e-12)
    ctx.observed["determinism_gpu"] = {
        "steps": len(first["losses"]),
        "batch": run["batch"],
        "cublas_workspace_config": first["cublas_workspace"],
        "step_seconds_deterministic": first["step_seconds"],
        "step_seconds_default": default["step_seconds"],
        "cost": cost,
    }
    return (
        f"2 fresh processes, seed 0, CUBLAS_WORKSPACE_CONFIG={first['cublas_workspace']}: {said}; "
        f"a step takes {cost:.2f}x torch's default (non-deterministic) time"
    )
