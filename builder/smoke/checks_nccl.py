"""gpu.nccl: an all_reduce across every visible GPU (one process each), with its bus bandwidth.

Bus bandwidth as nccl-tests defines it for all_reduce: algorithm bandwidth (bytes / time) times
2 (n - 1) / n, which makes it comparable with the hardware's link speed whatever the GPU count
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from typing import Any

from .checks_gpu import _cuda
from .framework import Context, Failed, check


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rank_main(rank: int, world: int, port: int, nbytes: int, repeat: int, out: str) -> None:
    """One process per GPU (torch.multiprocessing.spawn pickles this function by name)."""
    import torch
    import torch.distributed as dist

    from .compat import Timer

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        value = torch.full((1024,), float(rank + 1), device=f"cuda:{rank}")
        dist.all_reduce(value)
        expected = world * (world + 1) / 2
        if not torch.allclose(value, torch.full_like(value, expected)):
            raise RuntimeError(f"rank {rank}: all_reduce gave {value[0].item()}, expected {expected}")
        data = torch.ones(nbytes // 4, dtype=torch.float32, device=f"cuda:{rank}")
        dist.all_reduce(data)  # warm-up: rings and channels are set up on first use
        dist.barrier()
        with Timer(torch, f"cuda:{rank}") as timer:
            for _ in range(repeat):
                dist.all_reduce(data)
        if rank == 0:
            with open(out, "w", encoding="utf-8") as handle:
                json.dump({"seconds": timer.seconds, "nccl": list(torch.cuda.nccl.version())}, handle)
    finally:
        dist.destroy_process_group()


@check("gpu.nccl", gpu=True, timeout=240.0)
def nccl(ctx: Context) -> str:
    torch = _cuda(ctx)
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    nbytes, repeat = (1 << 20, 2) if ctx.small else (64 << 20, 20)
    with tempfile.TemporaryDirectory(prefix="torchyard-nccl-") as tmp:
        out = os.path.join(tmp, "rank0.json")
        mp.spawn(rank_main, args=(world, _free_port(), nbytes, repeat, out), nprocs=world, join=True)
        with open(out, encoding="utf-8") as handle:
            found: dict[str, Any] = json.load(handle)
    algbw = nbytes * repeat / max(found["seconds"], 1e-9) / 1e9
    busbw = algbw * 2 * (world - 1) / world
    ctx.observed["nccl_all_reduce"] = {"world": world, "bytes": nbytes, "algbw_gbps": algbw, "busbw_gbps": busbw}
    if world > 1 and not busbw > 0:
        raise Failed(f"NCCL all_reduce across {world} GPUs measured no bandwidth")
    version = ".".join(map(str, found["nccl"]))
    size = f"{nbytes >> 20} MiB"
    if world == 1:
        return f"NCCL {version} all_reduce on 1 GPU: correct; {size} in {algbw:.1f} GB/s (no bus: one GPU)"
    return f"NCCL {version} all_reduce across {world} GPUs: correct; {size}: bus bandwidth {busbw:.1f} GB/s"
