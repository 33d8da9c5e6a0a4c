"""profiler.cpu and gpu.profiler: torch.profiler records a training step and exports it as a Chrome trace.

The step is one SGD step of the small ResNet. The check reads the exported JSON (what a user loads into
chrome://tracing or Perfetto), not the profiler's Python objects: the forward convolution, its backward and the
optimizer's step must be there as operator events. On the GPU the trace must also hold CUDA kernels, which
torch records through CUPTI (libcupti): without it the trace has the operators and no kernel, silently; the
check then fails naming the package that carries libcupti (torch's own requirement on it, where torch has one).

What it cannot show: that timings in the trace are right, or that other tools (TensorBoard's plugin, Nsight)
read it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from importlib import metadata
from typing import Any

from .checks_cpu import _loaded
from .checks_gpu import _cuda
from .compat import restored
from .framework import Context, Failed, Skipped, check

# Names as torch >= 1.13 writes them: aten operators and the optimizer's user annotation ("Optimizer.step#SGD.step").
WANTED = ("aten::convolution", "aten::convolution_backward", "Optimizer.step#")
OPERATORS = ("cpu_op", "user_annotation")  # the trace categories of operators and annotations
KERNELS = ("kernel",)  # CUDA kernels (CUPTI's activity records)


def _profiler() -> Any:
    import torch

    try:
        from torch import profiler
    except ImportError:
        raise Skipped(f"torch {torch.__version__} has no torch.profiler (torch >= 1.8.1)") from None
    return profiler


def profile_step(device: str, cuda: bool) -> list[dict[str, Any]]:
    """One training step under torch.profiler; the events of its exported Chrome trace."""
    import torch

    from .model import SmallResNet

    profiler = _profiler()
    activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if cuda else [])
    torch.manual_seed(0)
    model = SmallResNet(width=8).to(device)
    images, labels = torch.randn(4, 3, 16, 16, device=device), torch.randint(0, 10, (4,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with profiler.profile(activities=activities) as prof:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="torchyard-profiler-") as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        return read_trace(path)


def read_trace(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise Failed(f"the profiler's Chrome trace is not JSON: {exc}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data  # the format allows a bare list
    if not isinstance(events, list):
        raise Failed("the profiler's Chrome trace has no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def operators(events: list[dict[str, Any]]) -> str:
    """Check the step's operators are in the trace; returns a summary, or Failed naming what is missing."""
    names = {str(e.get("name", "")) for e in events if e.get("cat") in OPERATORS}
    missing = [w for w in WANTED if not any(n == w or (w.endswith("#") and n.startswith(w)) for n in names)]
    if missing:
        raise Failed(
            f"torch.profiler's Chrome trace lacks {', '.join(missing)} ({len(names)} operator names recorded): "
            "the profiler did not record the training step"
        )
    return f"{len(names)} operators in the Chrome trace (convolution forward and backward, optimizer step)"


def cupti_package() -> str:
    """What carries libcupti for this torch: torch's own requirement on it, else the general answer."""
    try:
        wanted = [r.split(";")[0].strip() for r in metadata.requires("torch") or [] if "cupti" in r.lower()]
    except metadata.PackageNotFoundError:
        wanted = []
    if wanted:  # nvidia-cuda-cupti-cu12==12.8.90, or an extra: cuda-toolkit[cublas,...,cupti,...]==13.0.3
        name, extras, version = re.match(r"([^\[<>=!~ ]+)(\[[^\]]*\])?(.*)", wanted[0]).groups()  # type: ignore[union-attr]
        return f"install {name}{'[cupti]' if extras else ''}{version.strip()} (torch's requirement)"
    return "install the nvidia-cuda-cupti wheel of this CUDA, or the CUDA toolkit's cuda-cupti package"


def kernels(events: list[dict[str, Any]]) -> int:
    """How many CUDA kernels the trace holds; Failed, naming libcupti's package, when there are none."""
    found = sum(1 for e in events if e.get("cat") in KERNELS)
    if found:
        return found
    library = _loaded("libcupti")
    if library is None:
        raise Failed(f"torch.profiler recorded no CUDA kernel and libcupti is not loaded: {cupti_package()}")
    raise Failed(f"torch.profiler recorded no CUDA kernel although {library} is loaded")


@check("profiler.cpu", timeout=60.0)
def profiler_cpu(ctx: Context) -> str:
    import torch

    _profiler()
    with restored(torch):
        torch.set_num_threads(1)  # one small step: threads would only add noise to the trace
        return operators(profile_step("cpu", cuda=False)) + ", exported as Chrome JSON"


@check("gpu.profiler", gpu=True, timeout=120.0)
def profiler_gpu(ctx: Context) -> str:
    _cuda(ctx)
    events = profile_step("cuda", cuda=True)
    said = operators(events)
    count = kernels(events)
    ctx.observed["profiler_gpu"] = {"kernels": count, "library": _loaded("libcupti")}
    return f"{said}; {count} CUDA kernels (CUPTI), exported as Chrome JSON"
