"""Faults for the smoke suite's workflow checks (ddp, determinism, profiler), to show that each fails when the
thing it checks is broken. Test-only; armed with the simulated GPUs (sitecustomize.py) when TORCHYARD_SMOKE_FAULTS
holds a JSON list of fault names, in every process that imports torch: the suite's workers, torchrun and its
ranks, the determinism runs.

- ddp_desync: rank 1 (RANK=1) nudges its first parameter at every optimizer.zero_grad(): it drifts from the others;
- ddp_hang: rank 1 never joins (init_process_group sleeps for an hour);
- ddp_grad_off: DDP's gradient all_reduce (a comm hook on every DistributedDataParallel) gives 1.001 times the
  ranks' mean: a reduction that is off by 1e-3 of every gradient;
- nondeterministic: conv2d adds noise of 1e-6 from a generator seeded from os.urandom, like a kernel that
  accumulates in an order that changes from run to run (outside torchrun's ranks, so that only the determinism
  checks see it);
- profiler_off: torch.profiler.profile records nothing and exports an empty trace.
- conv_no_grad: conv2d sees its weight detached: the convolutions never learn (train.cpu, issue 21);
- compile_wrong_tanh: Inductor's C++ code generation writes tanh(x) as x, in scalar and vector code (compile.cpu);
- compile_wrong_erf: the same for erf(x), which Inductor's GELU is made of (gpu.compile's MLP; the simulation
  compiles it for the CPU).

Standard library + torch only; runs in the images (Python >= 3.8).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

ENV = "TORCHYARD_SMOKE_FAULTS"


def faults() -> list[str]:
    found = json.loads(os.environ.get(ENV) or "[]")
    return [str(name) for name in found]


def install(torch: Any) -> None:
    armed = faults()
    rank1 = os.environ.get("RANK") == "1"
    if "ddp_desync" in armed and rank1:
        _desync(torch)
    if "ddp_hang" in armed and rank1:
        _hang(torch)
    if "ddp_grad_off" in armed:
        _grad_off()
    if "nondeterministic" in armed and "RANK" not in os.environ:  # not in torchrun's ranks: it breaks one check
        _noisy_conv(torch)
    if "profiler_off" in armed:
        _silent_profiler(torch)
    if "conv_no_grad" in armed:
        _conv_without_weight_gradient(torch)
    if "compile_wrong_tanh" in armed:
        _wrong_cpp("tanh")
    if "compile_wrong_erf" in armed:
        _wrong_cpp("erf")


def _conv_without_weight_gradient(torch: Any) -> None:
    functional = torch.nn.functional
    real = functional.conv2d

    def conv2d(input: Any, weight: Any, *args: Any, **kwargs: Any) -> Any:
        return real(input, weight.detach(), *args, **kwargs)

    functional.conv2d = conv2d


def _wrong_cpp(op: str) -> None:
    from torch._inductor.codegen import cpp

    setattr(cpp.CppOverrides, op, staticmethod(lambda x: f"({x})"))
    setattr(cpp.CppVecOverrides, op, staticmethod(lambda x: f"({x})"))


def _grad_off() -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    real = DistributedDataParallel.__init__

    # a lambda: torch refuses a hook whose `bucket` is annotated other than dist.GradBucket (a string here)
    off = lambda state, bucket: default_hooks.allreduce_hook(state, bucket).then(  # noqa: E731
        lambda done: done.value() * 1.001
    )

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        self.register_comm_hook(None, off)

    DistributedDataParallel.__init__ = __init__


def _desync(torch: Any) -> None:
    real = torch.optim.Optimizer.zero_grad

    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            self.param_groups[0]["params"][0].add_(1e-3)
        return real(self, *args, **kwargs)

    torch.optim.Optimizer.zero_grad = zero_grad


def _hang(torch: Any) -> None:
    import torch.distributed as dist

    def init_process_group(*args: Any, **kwargs: Any) -> None:
        time.sleep(3600)

    dist.init_process_group = init_process_group


def _noisy_conv(torch: Any) -> None:
    functional = torch.nn.functional
    real = functional.conv2d
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(os.urandom(7), "little"))

    def conv2d(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        noise = torch.randn(out.shape, generator=generator, dtype=out.dtype).to(out.device)
        return out + noise * 1e-6

    functional.conv2d = conv2d


class _Silent:
    """A profiler that records nothing: what a build whose profiler does not work gives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"traceEvents": []}, handle)


def _silent_profiler(torch: Any) -> None:
    from torch import profiler

    profiler.profile = _Silent
