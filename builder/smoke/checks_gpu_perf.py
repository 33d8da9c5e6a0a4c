"""GPU checks with figures: training throughput per precision, cuBLAS GEMMs, memory, attention backends.

Every figure is measured after a warm-up of its own configuration, with CUDA events around a synchronize.
They are smoke signals (is the GPU doing what a healthy one does?), not benchmarks: docs/gpu-smoke.md.
"""

from __future__ import annotations

from typing import Any

from .checks_gpu import FP32_MAX, _cuda, relative_error, within
from .compat import Timer, capability_of, cpu_threads, restored, set_tf32
from .framework import Context, Failed, Skipped, check


def _sizes(ctx: Context, full: Any, small: Any) -> Any:
    return small if ctx.small else full


@check("gpu.train", gpu=True, timeout=420.0)
def train_gpu(ctx: Context) -> str:
    """The small ResNet in fp32 (TF32 off), TF32, AMP fp16 and bf16 with channels_last, and on the CPU."""
    torch = _cuda(ctx)
    from .model import AMP_BF16, AMP_FP16, FP32, TF32, train

    major, _ = capability_of(torch, 0)
    configs = [FP32] + ([TF32] if major >= 8 else []) + [AMP_FP16] + ([AMP_BF16] if major >= 8 else [])
    # --small (simulated or emulated devices): train.cpu's size (8 images of 16x16 at half width, 16 steps). On a
    # simulated GPU the AMP fp16 run is the CPU's fp16 convolutions, which have no fast kernels: at 32x32 and full
    # width it alone took 56 s of the check's 78 s.
    batch, steps, warmup, shape = _sizes(ctx, (256, 30, 5, {}), (8, 14, 2, {"size": 16, "width": 16}))
    results = {}
    with restored(torch):
        torch.backends.cudnn.benchmark = True
        for config in configs:
            results[config.name] = train("cuda", steps, batch, precision=config, warmup=warmup, **shape)
        torch.set_num_threads(cpu_threads()[0])
        cpu = train("cpu", *_sizes(ctx, (3, 64), (2, 8)), warmup=1, **shape)
    figures = {name: r.images_per_second for name, r in results.items()}
    ctx.observed["train_gpu"] = {
        "images_per_second": figures,
        "cpu_images_per_second": cpu.images_per_second,
        "gpu_over_cpu_fp32": figures["fp32"] / cpu.images_per_second,
        "runs": {name: vars(r) for name, r in results.items()},
    }
    for name, r in results.items():
        if not r.last_loss < 0.5 * r.first_loss:
            raise Failed(f"{name}: loss {r.first_loss:.3f} -> {r.last_loss:.3f}, did not fall by half")
    shown = ", ".join(f"{name} {ips:.0f}" for name, ips in figures.items())
    return f"images/s: {shown}; fp32 GPU/CPU x{figures['fp32'] / cpu.images_per_second:.1f}"


@check("gpu.gemm", gpu=True, timeout=180.0)
def gemm(ctx: Context) -> str:
    """cuBLAS fp32 (TF32 off) and fp64 against a float64 CPU reference; TFLOP/s per precision."""
    torch = _cuda(ctx)
    n = _sizes(ctx, 1024, 128)
    a, b = torch.randn(n, n, dtype=torch.float64), torch.randn(n, n, dtype=torch.float64)
    errors = {}
    with restored(torch):
        set_tf32(torch, False)
        errors["fp32"] = relative_error(a.float().cuda() @ b.float().cuda(), a.float().double() @ b.float().double())
        errors["fp64"] = relative_error(a.cuda() @ b.cuda(), a @ b)
        rates = _flops(ctx, torch, major=capability_of(torch, 0)[0])
    ctx.observed["gemm"] = {"relative_errors": errors, "tflops": rates}
    for name, limit in (("fp32", FP32_MAX), ("fp64", 1e-12)):
        if not within(errors[name], limit):
            raise Failed(f"cuBLAS {name} GEMM: relative error {errors[name]:.2e}, above {limit:g}")
    return f"errors fp32 {errors['fp32']:.1e}, fp64 {errors['fp64']:.1e}; TFLOP/s " + ", ".join(
        f"{k} {v:.1f}" for k, v in rates.items()
    )


def _flops(ctx: Context, torch: Any, major: int) -> dict[str, float]:
    n, repeat = _sizes(ctx, (4096, 10), (128, 2))
    kinds = [("fp32", torch.float32, False), ("fp16", torch.float16, False)]
    if major >= 8:
        kinds += [("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]
    rates = {}
    for name, dtype, tf32_on in kinds:
        set_tf32(torch, tf32_on)
        a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
        a @ b  # warm-up: cuBLAS handle, heuristics, kernel load
        with Timer(torch, "cuda") as timer:
            for _ in range(repeat):
                a @ b
        rates[name] = 2 * n**3 * repeat / max(timer.seconds, 1e-9) / 1e12
    return rates


@check("gpu.memory", gpu=True, timeout=180.0)
def memory(ctx: Context) -> str:
    """Most of the free memory can be allocated and written; host-to-device and back with pinned memory."""
    torch = _cuda(ctx)
    free, total = torch.cuda.mem_get_info(0)
    size = int(free * 0.9)
    block = torch.empty(size, dtype=torch.uint8, device="cuda")
    block.fill_(7)
    ends = int(block[-1].item()) + int(block[0].item())
    del block
    torch.cuda.empty_cache()
    if ends != 14:
        raise Failed(f"a {size >> 20} MiB allocation did not hold what was written")
    h2d, d2h = _bandwidth(ctx, torch)
    ctx.observed["memory"] = {"free": free, "total": total, "allocated": size, "h2d_gbps": h2d, "d2h_gbps": d2h}
    return (
        f"allocated {size / 2**30:.1f} GiB of {free / 2**30:.1f} GiB free ({total / 2**30:.1f} GiB total); "
        f"pinned copies: host->device {h2d:.1f} GB/s, device->host {d2h:.1f} GB/s"
    )


def _bandwidth(ctx: Context, torch: Any) -> tuple[float, float]:
    nbytes, repeat = _sizes(ctx, (256 << 20, 5), (4 << 20, 2))
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    device = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    device.copy_(host, non_blocking=True)  # warm-up
    with Timer(torch, "cuda") as up:
        for _ in range(repeat):
            device.copy_(host, non_blocking=True)
    with Timer(torch, "cuda") as down:
        for _ in range(repeat):
            host.copy_(device, non_blocking=True)
    return nbytes * repeat / max(up.seconds, 1e-9) / 1e9, nbytes * repeat / max(down.seconds, 1e-9) / 1e9


# Which fused attention backends an architecture must run (torch's own gates): memory-efficient from sm_50,
# flash on sm_8x and sm_90. cuDNN attention (torch >= 2.5, cuDNN 9, sm_90 / sm_100) and flash on newer
# architectures are tried and reported, not required: torch releases have turned them off and on by default.
SDPA_MAX_ERROR = 1e-2


def _backends(torch: Any, capability: tuple[int, int]) -> list[tuple[str, bool]]:
    major = capability[0]
    found = [("efficient", major >= 5), ("flash", 8 <= major <= 9)]
    attention = getattr(torch.nn, "attention", None)
    if attention is not None and hasattr(attention.SDPBackend, "CUDNN_ATTENTION"):
        found.append(("cudnn", False))
    return found


def _only(torch: Any, backend: str) -> Any:
    attention = getattr(torch.nn, "attention", None)
    if attention is not None and hasattr(attention, "sdpa_kernel"):  # torch >= 2.3
        names = {
            "math": "MATH",
            "flash": "FLASH_ATTENTION",
            "efficient": "EFFICIENT_ATTENTION",
            "cudnn": "CUDNN_ATTENTION",
        }
        return attention.sdpa_kernel([getattr(attention.SDPBackend, names[backend])])
    return torch.backends.cuda.sdp_kernel(  # torch 2.0 - 2.2
        enable_flash=backend == "flash", enable_math=backend == "math", enable_mem_efficient=backend == "efficient"
    )


@check("gpu.sdpa", gpu=True, timeout=120.0)
def sdpa(ctx: Context) -> str:
    """Scaled dot-product attention through each fused backend the architecture supports, against math."""
    torch = _cuda(ctx)
    functional = torch.nn.functional
    if not hasattr(functional, "scaled_dot_product_attention"):
        raise Skipped(f"torch {torch.__version__} has no scaled_dot_product_attention (torch >= 2.0)")
    shape = _sizes(ctx, (4, 8, 512, 64), (2, 2, 64, 32))
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.float16) for _ in range(3))
    with _only(torch, "math"):
        reference = functional.scaled_dot_product_attention(q, k, v, is_causal=True).float()
    done, notes = [], []
    for backend, required in _backends(torch, capability_of(torch, 0)):
        try:
            with _only(torch, backend):
                out = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        except RuntimeError as exc:
            if required:
                raise Failed(f"SDPA {backend} backend failed on this GPU: {str(exc).splitlines()[0]}") from None
            notes.append(f"{backend} not available")
            continue
        error = float((out.float() - reference).abs().max().item())
        if not within(error, SDPA_MAX_ERROR):
            raise Failed(f"SDPA {backend} backend differs from math by {error:.2e} (tolerance {SDPA_MAX_ERROR:g})")
        done.append(f"{backend} {error:.1e}")
    ctx.observed["sdpa"] = {"passed": done, "notes": notes}
    if not done:
        raise Failed("no fused attention backend ran on this GPU: " + "; ".join(notes))
    return "max error vs math: " + ", ".join(done) + (f"; {'; '.join(notes)}" if notes else "")
