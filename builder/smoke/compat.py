"""What differs between the torch releases and containers the suite meets, detected rather than assumed.

The oldest image the matrix builds has torch 1.13 and Python 3.8: `torch.amp.GradScaler` exists only from
torch 2.3 (before: torch.cuda.amp.GradScaler), `torch.cuda.get_arch_list()` answers [] without a GPU up to
about torch 2.12 (then the compiled architectures are read from libtorch_cuda.so's fat binary), and a
container's CPU limit is not os.cpu_count().
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from typing import Any

from .fatbin import code_list

CGROUP = "/sys/fs/cgroup"


# --- CPU threads ---------------------------------------------------------------------------------------


def _cgroup_cpus(root: str) -> float | None:
    """CPUs the container may use by its quota: cgroup v2 cpu.max, else v1 cpu.cfs_quota_us / period."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="utf-8") as handle:
            quota, _, period = handle.read().strip().partition(" ")
        return None if quota == "max" else int(quota) / int(period or "100000")
    except (OSError, ValueError):
        pass
    for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        try:
            with open(os.path.join(root, folder, "cpu.cfs_quota_us"), encoding="utf-8") as handle:
                quota_us = int(handle.read().strip())
            with open(os.path.join(root, folder, "cpu.cfs_period_us"), encoding="utf-8") as handle:
                period_us = int(handle.read().strip())
        except (OSError, ValueError):
            continue
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    return None


def cpu_threads(root: str = CGROUP) -> tuple[int, str]:
    """Threads for CPU work: the CPUs this process may run on, capped by the container's quota."""
    try:
        usable = len(os.sched_getaffinity(0))
        why = f"{usable} CPUs in the affinity mask"
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
        why = f"{usable} CPUs"
    quota = _cgroup_cpus(root)
    if quota is not None and quota < usable:
        return max(1, math.floor(quota)), f"cgroup CPU quota {quota:g} ({why})"
    return max(1, usable), why


# --- torch features ------------------------------------------------------------------------------------


def grad_scaler(torch: Any, device: str, enabled: bool) -> Any:
    """torch.amp.GradScaler(device) from torch 2.3; torch.cuda.amp.GradScaler before (CUDA only)."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, enabled=enabled)
    if device == "cuda":
        return torch.cuda.amp.GradScaler(enabled=enabled)
    return _NoScaler()


class _NoScaler:
    """What a disabled scaler does: nothing (CPU on torch < 2.3, where no CPU scaler exists)."""

    def scale(self, loss: Any) -> Any:
        return loss

    def step(self, optimizer: Any) -> None:
        optimizer.step()

    def update(self) -> None:
        pass


def autocast(torch: Any, device: str, dtype: Any, enabled: bool = True) -> Any:
    """torch.autocast (torch >= 1.10) for the device; torch.cuda.amp.autocast before."""
    if hasattr(torch, "autocast"):
        return torch.autocast(device_type=device, dtype=dtype, enabled=enabled)
    return torch.cuda.amp.autocast(enabled=enabled and device == "cuda")


def compiled_archs(torch: Any) -> tuple[list[str], list[str], str]:
    """(SASS, PTX, where from): torch.cuda.get_arch_list(), else the targets of libtorch_cuda.so's fat binary
    (torch answers [] there without a GPU up to about 2.12). aarch64 libraries read the same way."""
    listed = list(torch.cuda.get_arch_list())
    if listed:
        sass = [a for a in listed if a.startswith("sm_")]
        return sass, [a for a in listed if a.startswith("compute_")], "torch.cuda.get_arch_list()"
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    # The kernels live in libtorch_cuda.so; torch 1.13 splits it, its kernels being in libtorch_cuda_cu.so.
    libraries = [
        p for p in (os.path.join(lib, n) for n in ("libtorch_cuda.so", "libtorch_cuda_cu.so")) if os.path.exists(p)
    ]
    sass_all: set[str] = set()
    ptx_all: set[str] = set()
    for library in libraries:
        sass, ptx = code_list(library).targets()
        sass_all.update(sass)
        ptx_all.update(ptx)
    where = "the fat binary of " + (", ".join(os.path.basename(p) for p in libraries) or "no libtorch_cuda")
    return sorted(sass_all, key=code_order), sorted(ptx_all, key=code_order), where


def code_order(name: str) -> tuple[int, str]:
    digits = name.split("_", 1)[-1]
    number = digits.rstrip("af")
    return (int(number) if number.isdigit() else 0), digits[len(number) :]


def capability_of(torch: Any, index: int) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(index)
    return int(major), int(minor)


# --- settings a check changes, restored ------------------------------------------------------------------

_FLAGS = (
    ("backends.cudnn", "benchmark"),
    ("backends.cudnn", "deterministic"),
    ("backends.cudnn", "enabled"),
    ("backends.cudnn", "allow_tf32"),
    ("backends.cuda.matmul", "allow_tf32"),
    ("backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
)


def _holder(torch: Any, path: str) -> Any:
    holder = torch
    for part in path.split("."):
        holder = getattr(holder, part, None)
    return holder


@contextlib.contextmanager
def restored(torch: Any) -> Iterator[None]:
    """Every global setting a check may change (cuDNN and TF32 flags, matmul precision, CPU threads) is put back."""
    saved = [(h, name, getattr(h, name)) for h, name in ((_holder(torch, p), n) for p, n in _FLAGS) if hasattr(h, name)]
    precision = torch.get_float32_matmul_precision() if hasattr(torch, "get_float32_matmul_precision") else None
    threads = torch.get_num_threads() if hasattr(torch, "get_num_threads") else None
    try:
        yield
    finally:
        for holder, name, value in saved:
            setattr(holder, name, value)
        if precision is not None:
            torch.set_float32_matmul_precision(precision)
        if threads is not None:
            torch.set_num_threads(threads)


def set_tf32(torch: Any, on: bool) -> None:
    """TF32 for matmuls and cuDNN convolutions (the legacy flags, which every torch >= 1.7 honours)."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


# --- timing --------------------------------------------------------------------------------------------


class Timer:
    """Elapsed time of GPU work with CUDA events around a synchronize; on the CPU, the host clock."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.cuda = torch, device.startswith("cuda")
        self.start_event: Any = None
        self.end_event: Any = None
        self.started = self.seconds = 0.0

    def __enter__(self) -> Timer:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.start_event = self.torch.cuda.Event(enable_timing=True)
            self.end_event = self.torch.cuda.Event(enable_timing=True)
            self.start_event.record()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            self.end_event.record()
            self.end_event.synchronize()
            self.seconds = self.start_event.elapsed_time(self.end_event) / 1000.0
        else:
            self.seconds = time.perf_counter() - self.started
