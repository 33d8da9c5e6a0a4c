"""torch.compile with Inductor: C++ on the CPU (compile.cpu), Triton on the GPU (gpu.compile).

Both compile at run time, so an image needs a C/C++ compiler and Python's headers (templates: the os
stage installs them for torch >= 2.0). A small MLP's forward and backward, compiled, must match eager.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from .checks_gpu import _cuda, within
from .compat import cpu_threads, restored, set_tf32
from .framework import Context, Failed, Skipped, check

CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"  # Triton's kernels (torch puts them under Inductor's folder unless this is set)
CACHE_ENVS = (CACHE_ENV, TRITON_CACHE_ENV)
COMPILE_TOLERANCE = 1e-4  # fp32; Inductor fuses and reorders, it does not change precision


def _torch_with_compile() -> Any:
    import torch

    if not hasattr(torch, "compile"):
        raise Skipped(f"torch {torch.__version__} has no torch.compile (torch >= 2.0)")
    return torch


def _mlp(torch: Any, device: str) -> Any:
    """On the GPU the MLP of issue 11; on the CPU (issue 21) one hidden layer without biases: Inductor generates one
    C++ kernel for its forward (tanh) and one for its backward (tanh's derivative), each compiled by g++ and run,
    where the larger MLP needed five (a compile each, the check's time); eager against compiled is the same test."""
    nn = torch.nn
    if device == "cpu":
        return nn.Sequential(nn.Linear(32, 32, bias=False), nn.Tanh(), nn.Linear(32, 10, bias=False))
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10)).to(device)


# Inductor's settings for compile.cpu, where this torch has them (set for the check, then put back):
# compile_threads=1: two kernels, in two graphs compiled one after the other, gain nothing from a pool of compile
#   processes that each import torch first;
# cpp_cache_precompile_headers=False: building the precompiled header of cpp_prefix.h (a cold container has none) took
#   46-48 s where compiling both kernels from the plain headers took 39-48 s (a loaded 2-CPU machine, torch 2.13);
# cpp.vec_isa_ok=True (x86_64 only): Inductor believes /proc/cpuinfo's vector ISA instead of probing it with a compile
#   and a fresh Python (25 s of 72 there); the kernels are still compiled with that ISA's flags and run, so a compiler
#   or CPU that cannot do it fails the check rather than passing with Inductor's scalar fallback.
FAST_CPU = {"compile_threads": 1, "cpp_cache_precompile_headers": False}
FAST_X86 = {"cpp.vec_isa_ok": True}


def _fast_inductor() -> Any:
    """A context manager setting FAST_CPU (and FAST_X86) where this torch's Inductor has those settings."""
    try:
        from torch._inductor import config
    except ImportError:  # torch.compile itself then says what is missing
        return contextlib.nullcontext()
    wanted = dict(FAST_CPU, **(FAST_X86 if platform.machine() in ("x86_64", "AMD64") else {}))
    known = {key: value for key, value in wanted.items() if _has(config, key)}
    return config.patch(known)


def _has(config: Any, key: str) -> bool:
    holder = config
    for part in key.split("."):
        if not hasattr(holder, part):
            return False
        holder = getattr(holder, part)
    return True


def _compare(torch: Any, device: str) -> tuple[float, float]:
    """(max output error, max gradient error) of the compiled MLP against eager, on device."""
    torch.manual_seed(0)
    model = _mlp(torch, device)
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
    if not within(max(errors), COMPILE_TOLERANCE):
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
        with restored(torch), _fast_inductor(), _private_cache():  # the no-GPU checks share a worker
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
        with restored(torch), _private_cache():  # in full fp32: under TF32 eager and compiled differ by ~1e-4 on sm_80+
            set_tf32(torch, False)
            errors = _compare(torch, "cuda")
    except Exception as exc:
        raise Failed(f"torch.compile on the GPU failed: {_first_line(exc)}") from None
    return f"Inductor ({_triton()}): " + _verdict("the GPU", errors)


@contextlib.contextmanager
def _private_cache() -> Iterator[None]:
    """Empty Inductor and Triton caches for the check: it compiles every time, whatever an earlier run left in /tmp
    (a kernel found there is not compiled: the compiler the image needs would go unchecked)."""
    before = {name: os.environ.get(name) for name in CACHE_ENVS}
    with tempfile.TemporaryDirectory(prefix="torchyard-inductor-") as folder:
        os.environ[CACHE_ENV] = folder
        os.environ[TRITON_CACHE_ENV] = os.path.join(folder, "triton")
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _triton() -> str:
    try:
        import triton

        return f"Triton {triton.__version__}"
    except ImportError:
        return "Triton not importable"
