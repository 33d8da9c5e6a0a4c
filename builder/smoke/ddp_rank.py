"""One rank of the ddp checks, started by torchrun (`torchrun ... <smoke dir> --smoke-helper ddp-rank CONFIG`).

It reads its rank from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), joins the process group,
wraps the small ResNet in DistributedDataParallel and trains it on data of its own (seeded by its rank), and
writes what the parent check compares (checks_ddp.verdict) to rank<N>.json: the parameters' digest before DDP
(each rank initialises differently), after DDP's broadcast and after the last step; how far DDP's gradient of
the first step is from the mean of the ranks' local gradients, and how far those local gradients are apart;
the loss of every step (averaged over the ranks) and the time per step. Each stage is announced in
rank<N>.log first: the line a hung or crashed rank wrote last is what the check reports.
"""

from __future__ import annotations

import datetime
import json
import os
import traceback
from typing import Any

from .procs import die_with_parent


class Log:
    def __init__(self, folder: str, rank: int) -> None:
        self.path = os.path.join(folder, f"rank{rank}.log")
        self.rank = rank

    def __call__(self, text: str) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"rank {self.rank}: {text}\n")


def main(config: dict[str, Any]) -> int:
    die_with_parent()  # torchrun killed: its ranks go too
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log = Log(config["out"], rank)
    try:
        found = train(config, rank, world, log)
    except BaseException as exc:
        log(f"failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
        traceback.print_exc()
        raise
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(found, handle)
    log("done")
    return 0


def train(config: dict[str, Any], rank: int, world: int, log: Log) -> dict[str, Any]:
    log(f"importing torch (pid {os.getpid()})")
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from .model import SmallResNet, digest

    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = f"cuda:{local}" if config["device"] == "cuda" else "cpu"
    if config["device"] == "cuda":
        torch.cuda.set_device(local)
    else:
        torch.set_num_threads(int(config.get("threads", 1)))
    log(f"joining the process group ({config['backend']}, world {world})")
    timeout = datetime.timedelta(seconds=float(config["timeout"]))
    dist.init_process_group(config["backend"], rank=rank, world_size=world, timeout=timeout)
    try:
        log("joined; building the model")
        torch.manual_seed(1000 + rank)  # each rank starts from other weights: DDP must broadcast rank 0's
        model = SmallResNet(width=config["width"]).to(device)
        before = digest(model)
        ddp = DistributedDataParallel(model, device_ids=[local] if next(model.parameters()).is_cuda else None)
        found: dict[str, Any] = {"rank": rank, "world": world, "before": before, "broadcast": digest(model)}
        found.update(steps(torch, dist, ddp, model, config, rank, world, device, log))
        found["after"] = digest(model)
        return found
    finally:
        dist.destroy_process_group()


def steps(
    torch: Any, dist: Any, ddp: Any, model: Any, config: dict[str, Any], rank: int, world: int, device: str, log: Log
) -> dict[str, Any]:
    from .compat import Timer

    size, batch = config["size"], config["batch"]
    generator = torch.Generator().manual_seed(rank)  # each rank its own data
    images = torch.randn(batch, 3, size, size, generator=generator).to(device)
    labels = torch.randint(0, 10, (batch,), generator=generator).to(device)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=config["lr"], momentum=0.9)
    log("local gradients (no_sync) against DDP's")
    error, spread = _first_gradients(torch, dist, ddp, model, images, labels, world)
    total, warmup = int(config["steps"]), int(config["warmup"])
    losses = torch.zeros(total, device=device)  # on the device: no step waits for the host
    log(f"steps 1-{total} ({warmup} of warm-up)")
    for index in range(warmup):
        _step(torch, dist, ddp, optimizer, images, labels, losses, index)
    with Timer(torch, device) as timer:
        for index in range(warmup, total):
            _step(torch, dist, ddp, optimizer, images, labels, losses, index)
    timed = max(1, total - warmup)
    return {
        "grad_error": error,
        "grad_spread": spread,
        "losses": [value / world for value in losses.tolist()],
        "step_seconds": timer.seconds / timed,
        "timed_steps": timed,
    }


def _first_gradients(
    torch: Any, dist: Any, ddp: Any, model: Any, images: Any, labels: Any, world: int
) -> tuple[float, float]:
    """(relative error of DDP's gradient against the mean of the local ones, relative spread of the local ones)."""
    with ddp.no_sync():  # a backward without DDP's all_reduce: this rank's own gradient
        torch.nn.functional.cross_entropy(ddp(images), labels).backward()
    local = torch.cat([p.grad.detach().flatten() for p in model.parameters()])
    ddp.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(ddp(images), labels).backward()
    averaged = torch.cat([p.grad.detach().flatten() for p in model.parameters()])
    ddp.zero_grad(set_to_none=True)
    gathered = [torch.zeros_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    mean = torch.stack(gathered).mean(dim=0)
    scale = float(mean.abs().max().item()) or 1.0
    error = float((averaged - mean).abs().max().item()) / scale
    spread = max(float((g - local).abs().max().item()) for g in gathered) / scale
    return error, spread


def _step(torch: Any, dist: Any, ddp: Any, optimizer: Any, images: Any, labels: Any, losses: Any, index: int) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(ddp(images), labels)
    loss.backward()
    optimizer.step()
    total = loss.detach().clone()
    dist.all_reduce(total)  # summed over every rank's data (divided by the world size at the end)
    losses[index] = total
