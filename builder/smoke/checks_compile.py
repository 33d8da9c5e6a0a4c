"""torch.compile with Inductor: C++ on the CPU (compile.cpu), Triton on the GPU (gpu.compile).

Both compile at run time, so an image needs a C/C++ compiler and Python's headers (templates: the os
stage installs them for torch >= 2.0). A small MLP's forward and backward, compiled, must match eager.
"""

from __future__ import annotations

import shutil
from typing import Any

from .checks_gpu import _cuda
from .compat import cpu_threads, restored
from .framework import Context, Failed, Skipped, check

COMPILE_TOLERANCE = 1e-4  # fp32; Inductor fuses and reorders, it does not change precision


def _torch_with_compile() -> Any:
    import torch

    if not hasattr(torch, "compile"):
        raise Skipped(f"torch {torch.__version__} has no torch.compile (torch >= 2.0)")
    return torch


def _compare(torch: Any, device: str) -> tuple[float, float]:
    """(max output error, max gradient error) of the compiled MLP against eager, on device."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 10)
    ).to(device)
    x = torch.randn(16, 32, device=device)
    eager = model(x)
    eager.sum().backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    compiled = torch.compile(model)
    out = compiled(x)
    out.sum().backward()
    out_error = float((out - eager).abs().max().item())
    grad_error = max(float((p.grad - g).abs().max().item()) for p, g in zip(model.parameters(), grads))
    return out_error, grad_error


def _verdict(where: str, errors: tuple[float, float]) -> str:
    if not max(errors) < COMPILE_TOLERANCE:
        raise Failed(
            f"torch.compile on {where} differs from eager: output {errors[0]:.2e}, gradients {errors[1]:.2e} "
            f"(tolerance {COMPILE_TOLERANCE:g})"
        )
    return f"output {errors[0]:.1e}, gradients {errors[1]:.1e} from eager"


@check("compile.cpu", timeout=300.0)
def compile_cpu(ctx: Context) -> str:
    """Inductor compiles C++ for the CPU: the image needs a C++ compiler and Python.h."""
    torch = _torch_with_compile()
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise Failed("no C++ compiler (g++) on PATH: torch.compile (Inductor) compiles C++ at run time")
    try:
        with restored(torch):  # the no-GPU checks share a worker: the thread count goes back
            torch.set_num_threads(cpu_threads()[0])
            errors = _compare(torch, "cpu")
    except Exception as exc:  # Inductor's errors are long: the first line names the cause
        raise Failed(f"torch.compile on the CPU failed: {_first_line(exc)}") from None
    return f"Inductor (C++ with {compiler}): " + _verdict("the CPU", errors)


@check("gpu.compile", gpu=True, timeout=300.0)
def compile_gpu(ctx: Context) -> str:
    """Inductor compiles Triton kernels for the GPU (Triton needs a C compiler and Python.h at run time)."""
    _cuda(ctx)
    torch = _torch_with_compile()
    try:
        errors = _compare(torch, "cuda")
    except Exception as exc:
        raise Failed(f"torch.compile on the GPU failed: {_first_line(exc)}") from None
    return f"Inductor ({_triton()}): " + _verdict("the GPU", errors)


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _triton() -> str:
    try:
        import triton

        return f"Triton {triton.__version__}"
    except ImportError:
        return "Triton not importable"
