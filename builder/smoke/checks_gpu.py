"""Checks that need a GPU (run with --require-gpu; otherwise reported as skipped, never passed)."""

from __future__ import annotations

import socket
import subprocess
from typing import Any

from .checks_cpu import verdict
from .framework import Context, Failed, Skipped, check


def _cuda(ctx: Context) -> Any:
    import torch

    if not torch.version.cuda:
        raise Skipped("CPU build of torch")
    if not torch.cuda.is_available():
        if ctx.require_gpu:
            raise Failed(
                "--require-gpu, but torch.cuda.is_available() is False (no GPU visible, or the driver "
                "is too old for this CUDA build)"
            )
        raise Skipped("no GPU visible")
    return torch


def driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as handle:
            for word in handle.readline().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@check("gpu.devices", gpu=True)
def devices(ctx: Context) -> str:
    torch = _cuda(ctx)
    listed = torch.cuda.get_arch_list()
    sass = [a for a in listed if a.startswith("sm_")]
    ptx = [a for a in listed if a.startswith("compute_")]
    found = []
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        kind, code = verdict(f"sm_{major}{minor}", sass, ptx)
        found.append({"index": index, "name": name, "arch": f"sm_{major}{minor}", "support": kind, "code": code})
        if kind == "none":
            raise Failed(
                f"GPU {index} ({name}, sm_{major}{minor}) has no code in this torch build ({' '.join(listed)})"
            )
    ctx.observed["gpus"] = found
    driver = driver_version()
    ctx.observed["driver"] = driver
    if driver and ctx.expect.min_driver and _parts(driver) < _parts(ctx.expect.min_driver):
        raise Failed(f"driver {driver} is older than the image's minimum {ctx.expect.min_driver}")
    return (
        f"{len(found)} GPU(s): "
        + ", ".join(f"{g['name']} {g['arch']} {g['support']}" for g in found)
        + (f"; driver {driver}" if driver else "")
    )


@check("gpu.cudnn_conv", gpu=True)
def cudnn_conv(ctx: Context) -> str:
    torch = _cuda(ctx)
    torch.backends.cudnn.benchmark = True
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda()
    x = torch.randn(8, 16, 32, 32, device="cuda", requires_grad=True)
    y = conv(x)
    y.square().mean().backward()
    reference = torch.nn.functional.conv2d(
        x.detach().double().cpu(), conv.weight.detach().double().cpu(), conv.bias.detach().double().cpu(), padding=1
    )
    error = (y.detach().double().cpu() - reference).abs().max().item()
    if error > 1e-2 or x.grad is None or not torch.isfinite(x.grad).all():
        raise Failed(f"cuDNN convolution is wrong: max error {error:.2e} against a float64 CPU reference")
    return f"cuDNN {torch.backends.cudnn.version()} conv forward/backward, max error {error:.1e}"


@check("gpu.autocast", gpu=True)
def autocast(ctx: Context) -> str:
    torch = _cuda(ctx)
    a, b = torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    reference = a.double() @ b.double()
    dtypes = [torch.float16] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])
    done = []
    for dtype in dtypes:
        with torch.autocast("cuda", dtype=dtype):
            out = a @ b
        error = ((out.double() - reference).abs().max() / reference.abs().max()).item()
        if out.dtype != dtype or error > 2e-2:
            raise Failed(f"autocast {dtype}: got {out.dtype}, relative error {error:.2e}")
        done.append(f"{str(dtype).removeprefix('torch.')} rel.err {error:.1e}")
    return "; ".join(done) + ("" if len(dtypes) == 2 else "; bf16 not supported on this GPU")


@check("gpu.tf32", gpu=True)
def tf32(ctx: Context) -> str:
    torch = _cuda(ctx)
    torch.backends.cuda.matmul.allow_tf32 = True
    a, b = torch.randn(512, 512, device="cuda"), torch.randn(512, 512, device="cuda")
    error = ((a @ b).double() - a.double() @ b.double()).abs().max().item()
    if error > 1.0:
        raise Failed(f"TF32 matmul max error {error:.2e}")
    return f"TF32 matmul max error {error:.1e}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _all_reduce(rank: int, world: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.cuda.set_device(rank)
        value = torch.full((1024,), float(rank + 1), device="cuda")
        dist.all_reduce(value)
        expected = world * (world + 1) / 2
        if not torch.allclose(value, torch.full_like(value, expected)):
            raise RuntimeError(f"rank {rank}: all_reduce gave {value[0].item()}, expected {expected}")
    finally:
        dist.destroy_process_group()


@check("gpu.nccl", gpu=True, timeout=180.0)
def nccl(ctx: Context) -> str:
    torch = _cuda(ctx)
    _all_reduce(0, 1, _free_port())
    count = torch.cuda.device_count()
    if count > 1:
        import torch.multiprocessing as mp

        mp.spawn(_all_reduce, args=(count, _free_port()), nprocs=count, join=True)
    return f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} all_reduce: world size 1" + (
        f" and {count} (one process per GPU)" if count > 1 else ""
    )


GPU_STEPS = 60


@check("gpu.train", gpu=True, timeout=300.0)
def train_gpu(ctx: Context) -> str:
    """The small ResNet on the GPU with AMP + channels_last, next to the same run in fp32."""
    _cuda(ctx)
    from .model import train

    train("cuda", 5)  # warm-up: cuDNN autotuning and lazy initialisation stay out of the timings
    fast = train("cuda", GPU_STEPS, batch=256, amp=True, channels_last=True)
    plain = train("cuda", GPU_STEPS, batch=256)
    ctx.observed["train_gpu"] = {
        "amp_channels_last": vars(fast),
        "fp32": vars(plain),
        "speedup": fast.images_per_second / plain.images_per_second,
    }
    for label, result in (("AMP", fast), ("fp32", plain)):
        if not result.last_loss < 0.5 * result.first_loss:
            raise Failed(f"{label}: loss {result.first_loss:.3f} -> {result.last_loss:.3f}, did not fall by half")
    return (
        f"AMP+channels_last {fast.images_per_second:.0f} img/s, fp32 {plain.images_per_second:.0f} img/s "
        f"(x{fast.images_per_second / plain.images_per_second:.2f}); loss {fast.first_loss:.2f} -> "
        f"{fast.last_loss:.2f}"
    )


@check("gpu.extensions", gpu=True)
def extensions(ctx: Context) -> str:
    torch = _cuda(ctx)
    if not ctx.expect.extensions:
        raise Skipped("the image declares no extensions")
    done = []
    for name in ctx.expect.extensions:
        module: Any = __import__(name.replace("-", "_"))
        if not hasattr(module, "add_one"):
            raise Skipped(f"{name}: no known self-test (torchyard's example exposes add_one)")
        x = torch.arange(1024, dtype=torch.float32, device="cuda")
        if not torch.equal(module.add_one(x), x + 1):
            raise Failed(f"{name}.add_one gave a wrong answer on the GPU")
        done.append(f"{name}.add_one ok")
    return "; ".join(done)
