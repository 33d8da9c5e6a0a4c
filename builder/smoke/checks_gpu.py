"""Checks that need a GPU (run with --require-gpu; otherwise reported as skipped, never passed).

Each runs in a worker process of its own (runner.py) and restores every global setting it changes.
"""

from __future__ import annotations

import glob
import subprocess
from typing import Any

from .checks_cpu import verdict
from .compat import autocast, capability_of, compiled_archs, restored, set_tf32
from .framework import CPU_BUILD, NO_GPU, Context, Failed, Skipped, check

DEVICE_NODES = "/dev/nvidia[0-9]*"
DRIVER_FILE = "/proc/driver/nvidia/version"


def _cuda(ctx: Context) -> Any:
    import torch

    if not torch.version.cuda:
        raise Skipped(CPU_BUILD)
    if not torch.cuda.is_available():
        nodes = sorted(glob.glob(DEVICE_NODES))
        if nodes:  # the container sees a GPU, CUDA does not: the usual cause is a driver older than the image needs
            raise Failed(unreachable(ctx, nodes[0], torch.version.cuda))
        if ctx.require_gpu:
            raise Failed(
                "--require-gpu, but torch.cuda.is_available() is False (no GPU visible, or the driver "
                "is too old for this CUDA build)"
            )
        raise Skipped(NO_GPU)
    return torch


def no_gpu_reason(ctx: Context) -> str | None:
    """Why every GPU check would be skipped here (a CPU build of torch, no GPU visible), else None: with a GPU,
    a device node CUDA cannot reach, or --require-gpu, the GPU checks run, each in a worker of its own."""
    try:
        _cuda(ctx)
    except Skipped as exc:
        return str(exc)
    except Exception:  # Failed, or a torch that breaks: the checks themselves say why
        return None
    return None


def unreachable(ctx: Context, node: str, cuda: str) -> str:
    driver = driver_version()
    found = f"the host's driver is {driver}" if driver else f"no driver version in {DRIVER_FILE}"
    needed = ctx.expect.min_driver or "unknown (no manifest)"
    return (
        f"{node} exists but torch.cuda.is_available() is False: {found}; this image (CUDA {cuda}) needs "
        f"driver >= {needed}. Update the host driver, or start the container with the NVIDIA runtime (--gpus)"
    )


def driver_version() -> str | None:
    try:
        with open(DRIVER_FILE, encoding="utf-8") as handle:
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


def relative_error(found: Any, reference: Any) -> float:
    """Largest absolute error over the reference's largest magnitude (a float64 CPU computation)."""
    found64 = found.detach().double().cpu()
    scale = reference.abs().max().item() or 1.0
    return float((found64 - reference).abs().max().item() / scale)


def within(error: float, limit: float) -> bool:
    """A measured error passes strictly below its tolerance; NaN never passes (every comparison with it is False)."""
    return error < limit


def between(error: float, low: float, high: float) -> bool:
    """An error that must show a precision's effect: inside [low, high], both ends included; NaN never is."""
    return low <= error <= high


@check("gpu.devices", gpu=True)
def devices(ctx: Context) -> str:
    """Every visible GPU has code in this build and computes a matmul right (not only GPU 0)."""
    torch = _cuda(ctx)
    sass, ptx, _ = compiled_archs(torch)
    found = []
    with restored(torch):
        set_tf32(torch, False)
        for index in range(torch.cuda.device_count()):
            major, minor = capability_of(torch, index)
            name = torch.cuda.get_device_name(index)
            kind, code = verdict(f"sm_{major}{minor}", sass, ptx)
            if kind == "none":
                raise Failed(
                    f"GPU {index} ({name}, sm_{major}{minor}) has no code in this torch build "
                    f"({' '.join(sass + ptx) or 'no architectures found'})"
                )
            error = _matmul_error(torch, index)
            found.append({"index": index, "name": name, "arch": f"sm_{major}{minor}", "support": kind, "code": code})
            if not within(error, FP32_MAX):
                raise Failed(f"GPU {index} ({name}) computed a wrong matmul: relative error {error:.2e}")
    ctx.observed["gpus"] = found
    driver = driver_version()
    ctx.observed["driver"] = driver
    if driver and ctx.expect.min_driver and _parts(driver) < _parts(ctx.expect.min_driver):
        raise Failed(f"driver {driver} is older than the image's minimum {ctx.expect.min_driver}")
    return (
        f"{len(found)} GPU(s) computed: "
        + ", ".join(f"{g['name']} {g['arch']} {g['support']}" for g in found)
        + (f"; driver {driver}" if driver else "")
    )


def _matmul_error(torch: Any, index: int) -> float:
    a, b = torch.randn(256, 256, dtype=torch.float64), torch.randn(256, 256, dtype=torch.float64)
    device = f"cuda:{index}"
    out = a.float().to(device) @ b.float().to(device)
    torch.cuda.synchronize(index)
    return relative_error(out, a.float().double() @ b.float().double())


# Tolerances, relative to the reference's largest magnitude (fp32 has a 24-bit mantissa, TF32 a 11-bit one).
FP32_MAX = 1e-5  # fp32 GEMMs of these sizes land around 1e-7
TF32_MIN, TF32_MAX = 5e-5, 1e-2  # TF32 GEMMs land around 3e-4: TF32 on must show it
CONV_MAX = 1e-3  # cuDNN's fp32 algorithms (Winograd, FFT included) stay well below this


@check("gpu.cudnn_conv", gpu=True)
def cudnn_conv(ctx: Context) -> str:
    """cuDNN is available and enabled; its conv forward, input and weight gradients match float64 on the CPU."""
    torch = _cuda(ctx)
    if not torch.backends.cudnn.is_available():
        raise Failed("cuDNN is not available to torch (torch.backends.cudnn.is_available() is False)")
    if not torch.backends.cudnn.enabled:
        raise Failed("cuDNN is disabled (torch.backends.cudnn.enabled is False)")
    with restored(torch):
        set_tf32(torch, False)
        torch.backends.cudnn.benchmark = True
        x = torch.randn(8, 16, 32, 32, dtype=torch.float64, requires_grad=True)
        weight = torch.randn(32, 16, 3, 3, dtype=torch.float64, requires_grad=True)
        reference = torch.nn.functional.conv2d(x, weight, padding=1)
        reference.square().mean().backward()
        xg = x.detach().float().cuda().requires_grad_()
        wg = weight.detach().float().cuda().requires_grad_()
        out = torch.nn.functional.conv2d(xg, wg, padding=1)
        out.square().mean().backward()
        errors = {
            "output": relative_error(out, reference.detach()),
            "input grad": relative_error(xg.grad, x.grad),
            "weight grad": relative_error(wg.grad, weight.grad),
        }
    worst = max(errors, key=lambda k: errors[k])
    if not within(errors[worst], CONV_MAX):
        raise Failed(
            f"cuDNN convolution {worst} is wrong: relative error {errors[worst]:.2e} against a float64 CPU "
            f"reference (tolerance {CONV_MAX:g})"
        )
    return f"cuDNN {torch.backends.cudnn.version()} conv forward/backward (fp32, TF32 off): " + ", ".join(
        f"{k} {v:.1e}" for k, v in errors.items()
    )


@check("gpu.autocast", gpu=True)
def autocast_check(ctx: Context) -> str:
    """fp16 autocast everywhere; bf16 autocast where bf16 is native (capability >= 8.0), named emulated below."""
    torch = _cuda(ctx)
    major, minor = capability_of(torch, 0)
    native_bf16 = major >= 8
    ctx.observed["bf16_native"] = native_bf16
    a, b = torch.randn(256, 256, dtype=torch.float64), torch.randn(256, 256, dtype=torch.float64)
    reference = a @ b
    dtypes = [torch.float16] + ([torch.bfloat16] if native_bf16 else [])
    done = []
    for dtype in dtypes:
        with autocast(torch, "cuda", dtype):
            out = a.float().cuda() @ b.float().cuda()
        error = relative_error(out, reference)
        if out.dtype != dtype or not within(error, 2e-2):
            raise Failed(f"autocast {dtype}: got {out.dtype}, relative error {error:.2e}")
        done.append(f"{str(dtype).split('.')[-1]} rel.err {error:.1e}")
    if not native_bf16:
        done.append(f"bf16 not native on sm_{major}{minor} (emulated at best; needs capability >= 8.0)")
    else:
        done.append("bf16 native")
    return "; ".join(done)


@check("gpu.tf32", gpu=True)
def tf32(ctx: Context) -> str:
    """With TF32 on, a capability >= 8.0 GPU shows TF32-sized errors; with it off, fp32-sized ones."""
    torch = _cuda(ctx)
    major, minor = capability_of(torch, 0)
    a, b = torch.randn(512, 512, dtype=torch.float64), torch.randn(512, 512, dtype=torch.float64)
    reference = a.float().double() @ b.float().double()
    errors = {}
    with restored(torch):
        for on in (True, False):
            set_tf32(torch, on)
            errors[on] = relative_error(a.float().cuda() @ b.float().cuda(), reference)
    ctx.observed["tf32_errors"] = {"on": errors[True], "off": errors[False]}
    if not within(errors[False], FP32_MAX):
        raise Failed(f"TF32 off: relative error {errors[False]:.2e}, above fp32's {FP32_MAX:g}")
    if major < 8:
        if not within(errors[True], FP32_MAX):
            raise Failed(f"sm_{major}{minor} has no TF32, yet TF32 on gave a relative error of {errors[True]:.2e}")
        return f"no TF32 on sm_{major}{minor} (needs capability >= 8.0): fp32 error {errors[False]:.1e} both ways"
    if not between(errors[True], TF32_MIN, TF32_MAX):
        raise Failed(
            f"TF32 on: relative error {errors[True]:.2e}, outside TF32's [{TF32_MIN:g}, {TF32_MAX:g}] "
            "(TF32 was not used, or the result is wrong)"
        )
    return f"TF32 on: relative error {errors[True]:.1e}; off: {errors[False]:.1e}"


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
