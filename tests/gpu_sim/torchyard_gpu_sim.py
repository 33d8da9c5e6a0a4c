"""A test-only layer that makes REAL (CPU) torch report simulated GPUs and runs their work on the CPU.

Armed by `sitecustomize.py` beside this file when TORCHYARD_GPU_SIM holds a JSON configuration and this
folder is on PYTHONPATH, so it also takes effect in every process the suite starts (its workers,
`torch.multiprocessing.spawn` children, DataLoader workers). Once torch has been imported:

- torch.cuda reports the configured GPUs (count, names, capabilities, memory) and events time on the
  host clock; `cuda` devices in torch calls (factories, `.to`, `.cuda()`, modules) become `cpu`, through a
  TorchFunctionMode; pinned memory is the plain memory it already is;
- autocast("cuda") and GradScaler("cuda") become their CPU forms; the NCCL backend becomes gloo;
- an `sdpa_kernel` restriction keeps the math backend available (the CPU has no flash/cuDNN kernels);
- matmuls under `allow_tf32` round their fp32 inputs to TF32 (10-bit mantissa) on GPUs of capability
  >= 8.0, so the TF32 check sees TF32-sized errors as on a real Ampere-or-newer GPU.

It proves control flow (API use, shapes, dtypes, pickling into spawned processes, restored settings), not
numerics or speed: every figure it produces is the CPU's. `faults` injects wrong answers so the tests
can show that a check fails: conv_grad, conv_out (a convolution's output 1 % off, its gradients right), tf32_ignored,
tf32_stuck (TF32 with allow_tf32 off too), tf32_everywhere (TF32 below capability 8.0 too), tf32_wrong and fp32_wrong
(fp32 products 5 % off with TF32, 1 % off without), fp64_wrong (fp64 products 1e-9 off), gemm, sdpa, all_reduce,
gpu:N (device N computes NaN), half_gemm (fp16 and bf16 products 5 % off), amp_off (autocast("cuda") casts nothing),
memory_head and memory_tail (a filled GPU tensor's first or last element stays 0);
`"cudnn": null` makes cuDNN unavailable, `"cudnn_enabled": false` disables it; `"cupti": true` puts kernel
events into the profiler's traces (without it they have none, as without libcupti); `"record": PATH` logs each
process group's backend, each all_reduce (bytes, simulated GPU), each matmul, convolution and copy_ (dtypes,
shapes, bytes, GPUs, TF32, non_blocking; a convolution's cuDNN TF32, benchmark and deterministic settings),
each torch.empty on a GPU (bytes, dtype, GPU), each scaled_dot_product_attention (shapes, dtypes, GPUs,
is_causal) and each start of the profiler (torch's thread count then) as JSON lines;
`"event_seconds": S` makes
every pair of CUDA events S seconds apart, so a check's figures (TFLOP/s, GB/s) can be computed by the test;
`"sdpa_missing": ["flash", ...]` makes attention restricted to those fused backends fail as on a GPU without them.
`"cheap_products_from": N` skips computing matrix products with a side of N or more (zeros of their shape): a
check's full sizes, recorded, at the CPU's cost of making the inputs.
As on real torch, `torch.cuda.set_device` needs an index, an NCCL group refuses a tensor that is not on a
(simulated) GPU, and a product, linear layer or convolution refuses tensors on two devices (a module's `.to`/`.cuda`
marks its parameters and buffers with their GPU).

Standard library + torch only; runs in the images (Python >= 3.8).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import types
from typing import Any, Iterator

import torchyard_faults
import torchyard_ort_sim
from torchyard_after_import import after_import
from torchyard_gpu_sim_mode import STATE, device_index, mode_class, note

ENV = "TORCHYARD_GPU_SIM"
DEFAULT_GPU = {"name": "Simulated NVIDIA H100", "capability": [9, 0], "memory": 512 << 20}


def config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(os.environ.get(ENV) or "{}")
    data.setdefault("gpus", [DEFAULT_GPU])
    data.setdefault("faults", [])
    return data


def arm() -> None:
    after_import("torch", _patch)


def _patch(torch: Any) -> None:
    """The simulated GPUs where TORCHYARD_GPU_SIM is set; the workflow checks' faults where theirs is."""
    simulated = bool(os.environ.get(ENV))
    cfg = config() if simulated else {}
    if simulated:
        install(torch, cfg)
    if os.environ.get(torchyard_faults.ENV):
        torchyard_faults.install(torch)
    torchyard_ort_sim.arm(simulated, torchyard_faults.faults(), (lambda entry: note(cfg, entry)) if simulated else None)


def install(torch: Any, cfg: dict[str, Any]) -> None:
    if getattr(torch, "_torchyard_gpu_sim", False):
        return
    torch._torchyard_gpu_sim = True
    _patch_cuda(torch, cfg)
    _patch_versions(torch, cfg)
    _patch_amp(torch, cfg)
    _patch_distributed(torch, cfg)
    _patch_sdpa(torch, cfg)
    _patch_compile(torch, cfg)
    _patch_profiler(torch, cfg)
    _patch_modules(torch)
    torch.Tensor.pin_memory = lambda self, *args, **kwargs: self  # DataLoader's pin thread has no mode
    torch.Tensor.is_pinned = lambda self, *args, **kwargs: True
    _Mode.active = mode_class(torch)(cfg)
    _Mode.active.__enter__()


class _Mode:
    active: Any = None


# --- torch.cuda ------------------------------------------------------------------------------------


class _Event:
    fixed: float | None = None  # "event_seconds": every timed region lasts this long, so figures can be checked

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _Event) -> float:
        if self.at is None or end.at is None:
            raise RuntimeError("elapsed_time of an event that was not recorded")
        return (end.at - self.at if self.fixed is None else self.fixed) * 1000.0


class _DeviceContext:
    def __init__(self, device: Any) -> None:
        self.index = device_index(device)
        self.previous = 0

    def __enter__(self) -> _DeviceContext:
        self.previous = STATE["device"]
        STATE["device"] = self.index
        return self

    def __exit__(self, *exc: object) -> None:
        STATE["device"] = self.previous


def _patch_cuda(torch: Any, cfg: dict[str, Any]) -> None:
    gpus: list[dict[str, Any]] = [dict(DEFAULT_GPU, **g) for g in cfg["gpus"]]
    cuda = torch.cuda
    _Event.fixed = cfg.get("event_seconds")

    def gpu(device: Any = None) -> dict[str, Any]:
        index = device_index(device)
        if not 0 <= index < len(gpus):
            raise RuntimeError(f"CUDA error: invalid device ordinal {index}")
        return gpus[index]

    def properties(device: Any = None) -> Any:
        if STATE.get("hidden"):
            raise RuntimeError("no GPU while compiled code runs (simulation)")
        g = gpu(device)
        major, minor = g["capability"]
        return types.SimpleNamespace(
            name=g["name"], major=major, minor=minor, total_memory=g["memory"], multi_processor_count=132
        )

    def set_device(device: Any) -> None:
        if device is None or (not isinstance(device, int) and getattr(torch.device(device), "index", None) is None):
            # as real torch's _get_device_index(optional=False): no current-device default here
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        gpu(device)
        STATE["device"] = device_index(device)

    values: dict[str, Any] = {
        "is_available": lambda: bool(gpus) and not STATE.get("hidden"),
        "device_count": lambda: 0 if STATE.get("hidden") else len(gpus),
        "get_device_capability": lambda device=None: tuple(gpu(device)["capability"]),
        "get_device_name": lambda device=None: gpu(device)["name"],
        "get_device_properties": properties,
        "current_device": lambda: STATE["device"],
        "set_device": set_device,
        "device": _DeviceContext,
        "synchronize": lambda device=None: None,
        "Event": _Event,
        "mem_get_info": lambda device=None: (int(gpu(device)["memory"] * 0.9), int(gpu(device)["memory"])),
        "empty_cache": lambda: None,
        "memory_allocated": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "reset_peak_memory_stats": lambda device=None: None,
        "is_bf16_supported": lambda including_emulation=True: True,  # as torch >= 2.3 answers on sm_7x too
        "is_initialized": lambda: True,
        "init": lambda: None,
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cuda": None,
        "get_rng_state_all": lambda: [torch.get_rng_state() for _ in gpus],
        "set_rng_state_all": lambda states: None,
    }
    if cfg.get("arch_list") is not None:
        values["get_arch_list"] = lambda: list(cfg["arch_list"])
    for name, value in values.items():
        setattr(cuda, name, value)
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:  # torch >= 2.6: the tensors are on the CPU, which has no accelerator to ask
        accelerator.is_available = lambda: False
        accelerator.current_accelerator = lambda check_available=False: None
        accelerator.device_count = lambda: 0


def _patch_versions(torch: Any, cfg: dict[str, Any]) -> None:
    if "cuda" in cfg:
        torch.version.cuda = cfg["cuda"]
    if cfg.get("cudnn_enabled") is False:
        torch.backends.cudnn.enabled = False
    if "cudnn" in cfg:
        number = cfg["cudnn"]
        torch.backends.cudnn.is_available = lambda: number is not None
        torch.backends.cudnn.version = lambda: number
    if "nccl" in cfg:
        torch.cuda.nccl.version = lambda: tuple(cfg["nccl"])


def _patch_amp(torch: Any, cfg: dict[str, Any]) -> None:
    real_autocast = torch.autocast

    class SimAutocast(real_autocast):  # type: ignore[misc,valid-type]
        def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True, **kwargs: Any) -> None:
            if device_type == "cuda":
                device_type, dtype = "cpu", dtype or torch.float16
                enabled = enabled and "amp_off" not in cfg["faults"]
            super().__init__(device_type, dtype=dtype, enabled=enabled, **kwargs)

    torch.autocast = SimAutocast
    torch.amp.autocast = SimAutocast
    torch.cuda.amp.autocast = lambda enabled=True, dtype=None, **kw: SimAutocast("cuda", dtype, enabled, **kw)
    real_scaler = getattr(torch.amp, "GradScaler", None)
    if real_scaler is None:  # torch < 2.3 has no CPU scaler: a pass-through one keeps the control flow
        return

    class SimScaler(real_scaler):  # type: ignore[misc,valid-type]
        def __init__(self, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            super().__init__("cpu" if device == "cuda" else device, *args, **kwargs)

    torch.amp.GradScaler = SimScaler
    torch.cuda.amp.GradScaler = lambda *args, **kwargs: SimScaler("cuda", *args, **kwargs)


def _patch_distributed(torch: Any, cfg: dict[str, Any]) -> None:
    import torch.distributed as dist

    real_init, real_all_reduce = dist.init_process_group, dist.all_reduce

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        STATE["backend"] = backend
        note(cfg, {"init": backend, "device": STATE["device"]})
        return real_init("gloo" if backend in (None, "nccl") else backend, *args, **kwargs)

    def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        gpu = getattr(tensor, "_sim_gpu", None)
        if STATE.get("backend") == "nccl" and gpu is None:  # an NCCL-only group has no backend for host memory
            raise RuntimeError("No backend type associated with device type cpu (simulation: NCCL group)")
        note(cfg, {"all_reduce": tensor.numel() * tensor.element_size(), "gpu": gpu, "device": STATE["device"]})
        work = real_all_reduce(tensor, *args, **kwargs)
        if "all_reduce" in cfg["faults"]:
            tensor.add_(1)
        return work

    dist.init_process_group = init_process_group
    dist.all_reduce = all_reduce
    dist.is_nccl_available = lambda: True


SDPA_NAMES = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def _patch_sdpa(torch: Any, cfg: dict[str, Any]) -> None:
    attention: Any = getattr(torch.nn, "attention", None)
    real: Any = getattr(attention, "sdpa_kernel", None)
    functional = torch.nn.functional
    real_sdpa = functional.scaled_dot_product_attention
    chosen: list[Any] = []

    @contextlib.contextmanager
    def sdpa_kernel(backends: Any, *args: Any, **kwargs: Any) -> Iterator[None]:
        wanted = list(backends) if isinstance(backends, (list, tuple)) else [backends]
        math = attention.SDPBackend.MATH
        with real(list(dict.fromkeys([*wanted, math])), *args, **kwargs):
            chosen.append(wanted)
            try:
                yield
            finally:
                chosen.pop()

    missing = (
        {getattr(attention.SDPBackend, SDPA_NAMES[n]) for n in cfg.get("sdpa_missing", [])} if attention else set()
    )

    def sdpa(*args: Any, **kwargs: Any) -> Any:
        if chosen and missing and set(chosen[-1]) <= missing:  # as torch when no allowed kernel fits this GPU
            raise RuntimeError("No available kernel. Aborting execution. (simulation: sdpa_missing)")
        out = real_sdpa(*args, **kwargs)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        shapes, dtypes = [list(t.shape) for t in tensors], [str(t.dtype) for t in tensors]
        gpus = [getattr(t, "_sim_gpu", None) for t in tensors]
        note(cfg, {"op": "sdpa", "shapes": shapes, "dtypes": dtypes, "gpus": gpus, "causal": kwargs.get("is_causal")})
        fused = chosen and attention is not None and attention.SDPBackend.MATH not in chosen[-1]
        return out + 0.1 if fused and "sdpa" in cfg["faults"] else out

    if real is not None:
        attention.sdpa_kernel = sdpa_kernel
    functional.scaled_dot_product_attention = sdpa


def _patch_compile(torch: Any, cfg: dict[str, Any]) -> None:
    """Compiled code runs with the mode off and the GPUs hidden: its tensors are on the CPU already, Dynamo
    should trace the model, not this layer, and Inductor compiles for the CPU (C++), not through Triton."""
    real = getattr(torch, "compile", None)
    if real is None:
        return

    def compile(model: Any = None, **kwargs: Any) -> Any:
        compiled = real(model, **kwargs)

        def run(*args: Any, **kw: Any) -> Any:
            with suspended(torch):
                return compiled(*args, **kw)

        return run

    torch.compile = compile


def _patch_profiler(torch: Any, cfg: dict[str, Any]) -> None:
    """The CPU build records no CUDA activity (it has no CUPTI): the CUDA activity is dropped. With `"cupti": true`
    the exported trace gets a "kernel" event for every operator, as CUPTI's records would appear, where real torch
    would have them: the CUDA activity was asked for (or none was named: torch then takes every activity it
    supports) and work ran on a simulated GPU while the profiler recorded. Without "cupti" the trace has no
    kernel, as in an image without libcupti."""
    from torch import profiler

    real = profiler.profile
    cuda = profiler.ProfilerActivity.CUDA

    class SimProfile(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, activities: Any = None, **kwargs: Any) -> None:
            self.sim_cuda = cuda in activities if activities else bool(cfg["gpus"])
            self.sim_gpu_ops = 0
            kept = [a for a in activities or [profiler.ProfilerActivity.CPU] if a != cuda]
            super().__init__(*args, activities=kept, **kwargs)

        def start(self) -> None:
            note(cfg, {"op": "profile", "threads": torch.get_num_threads()})
            self.sim_gpu_ops -= STATE["gpu_ops"]
            super().start()

        def stop(self) -> None:
            super().stop()
            self.sim_gpu_ops += STATE["gpu_ops"]

        def export_chrome_trace(self, path: str) -> Any:
            done = super().export_chrome_trace(path)
            if cfg.get("cupti") and self.sim_cuda and self.sim_gpu_ops > 0:
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
                ops = [e for e in data["traceEvents"] if e.get("cat") == "cpu_op"]
                data["traceEvents"] += [dict(e, cat="kernel", name=f"sim_kernel<{e['name']}>") for e in ops]
                with open(path, "w", encoding="utf-8") as handle:
                    json.dump(data, handle)
            return done

    profiler.profile = SimProfile


def _patch_modules(torch: Any) -> None:
    """A module's parameters and buffers carry the simulated GPU its `.to`/`.cuda` moved them to (the move is in
    place: the tensors keep their objects, which the mode alone would not mark), and lose it with `.cpu` or a move
    to the host, so a layer whose weights stayed on the host refuses a GPU input as real torch does."""
    module = torch.nn.Module
    real_to, real_cuda, real_cpu = module.to, module.cuda, module.cpu

    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = real_to(self, *args, **kwargs)
        _place(self, _target(torch, args, kwargs))
        return out

    def cuda(self: Any, device: Any = None) -> Any:
        out = real_cuda(self, device)
        _place(self, device_index(device))
        return out

    def cpu(self: Any) -> Any:
        out = real_cpu(self)
        _place(self, None)
        return out

    module.to, module.cuda, module.cpu = to, cuda, cpu


_KEEP = "keep"  # a move that names no device (a dtype only): the tensors stay where they are


def _target(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    for value in (*args, kwargs.get("device"), kwargs.get("tensor")):
        if isinstance(value, torch.Tensor):
            return getattr(value, "_sim_gpu", None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, (str, torch.device)):  # not torch.device(value): the mode would make "cuda" "cpu"
            kind = value.split(":", 1)[0] if isinstance(value, str) else value.type
            return device_index(value) if kind == "cuda" else None
    return _KEEP


def _place(module: Any, gpu: Any) -> None:
    if gpu == _KEEP:
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        if gpu is None:
            tensor.__dict__.pop("_sim_gpu", None)
        else:
            tensor._sim_gpu = gpu


@contextlib.contextmanager
def suspended(torch: Any) -> Iterator[None]:
    popped, hidden = [], STATE.get("hidden")
    STATE["hidden"] = True  # Inductor, seeing no GPU, compiles for the CPU and reads no GPU properties
    while torch._C._len_torch_function_stack() > 0:
        popped.append(torch._C._pop_torch_function_stack())
    try:
        yield
    finally:
        STATE["hidden"] = hidden
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)
