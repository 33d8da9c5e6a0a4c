"""onnx.cpu and gpu.onnx: the inference image's path from a torch model to ONNX Runtime, and what it is worth.

onnx.cpu exports the small ResNet (eval mode: BatchNorm uses its running statistics) with torch.onnx.export, checks
the file with onnx.checker, runs it in ONNX Runtime on the CPU provider and compares ORT's logits with eager
torch's on the same input: the largest difference must be within 1e-4 (float32, the same arithmetic in another
order). gpu.onnx runs the same file with the CUDA provider asked first: ORT falls back to the CPU silently when it
cannot load CUDA (a CPU onnxruntime, a CUDA or cuDNN major torch did not bring), so the CUDA provider must be the
first of session.get_providers(); the logits must match eager torch on the GPU within 1e-3 (cuDNN picks other
algorithms), and the check reports the latency per batch of ORT (CUDA provider, host arrays in and out), eager
fp32 and eager AMP fp16.

Images without onnxruntime (runtime, devel) skip both; an inference image without it fails.
What it cannot show: that another model exports (torch.onnx does not cover every operator), that ORT's other
providers (TensorRT, OpenVINO) work, or latency under another batch, shape or GPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from typing import Any

from .checks_gpu import _cuda
from .compat import Timer, autocast, restored
from .framework import Context, Failed, Skipped, check

CPU_TOLERANCE, GPU_TOLERANCE = 1e-4, 1e-3
CUDA_PROVIDER, CPU_PROVIDER = "CUDAExecutionProvider", "CPUExecutionProvider"
CPU_SHAPE = {"batch": 4, "size": 16, "width": 16}
GPU_SHAPE = {"batch": 32, "size": 32, "width": 32}
SMALL_GPU_SHAPE = {"batch": 4, "size": 16, "width": 16}
RUNS, SMALL_RUNS = 20, 3


def onnxruntime(ctx: Context) -> Any:
    """ORT, or Skipped where the image is not meant to have it; an inference image without it fails."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        if ctx.expect.flavor == "inference":
            raise Failed(f"an inference image without a working onnxruntime: {exc}") from None
        raise Skipped("no onnxruntime (not an inference image)") from None
    return ort


def export(folder: str, shape: dict[str, int]) -> tuple[Any, Any, str]:
    """The seeded small ResNet in eval mode, an input, and the ONNX file torch.onnx.export wrote."""
    import torch

    from .model import SmallResNet

    torch.manual_seed(0)
    model = SmallResNet(width=shape["width"]).eval()
    images = torch.randn(shape["batch"], 3, shape["size"], shape["size"])
    path = os.path.join(folder, "small_resnet.onnx")
    chatter = io.StringIO()  # the exporter reports its steps on stdout
    try:
        with contextlib.redirect_stdout(chatter), torch.no_grad():
            torch.onnx.export(model, (images,), path, input_names=["images"], output_names=["logits"])
    except Exception as exc:  # any exporter failure is this check's verdict
        raise Failed(f"torch.onnx.export of the small ResNet failed: {type(exc).__name__}: {exc}"[:600]) from None
    _checked(path)
    return model, images, path


def _checked(path: str) -> None:
    try:
        import onnx
    except ImportError:
        return  # ORT reads the file below: a bad one fails there
    try:
        onnx.checker.check_model(path)
    except Exception as exc:  # the checker's own exception types vary by release
        raise Failed(f"onnx.checker rejects the exported model: {exc}"[:600]) from None


def largest_difference(ours: Any, theirs: Any) -> float:
    """max |a - b| over two arrays of logits of the same shape."""
    import numpy

    a, b = numpy.asarray(ours, dtype="float64"), numpy.asarray(theirs, dtype="float64")
    if a.shape != b.shape:
        raise Failed(f"ONNX Runtime's output has shape {list(a.shape)}, eager torch's {list(b.shape)}")
    return float(numpy.max(numpy.abs(a - b)))


def compare(ours: Any, theirs: Any, tolerance: float, where: str) -> float:
    found = largest_difference(ours, theirs)
    if not found <= tolerance:  # also a NaN
        raise Failed(f"ONNX Runtime ({where}) differs from eager torch by {found:.3g} (allowed {tolerance:g})")
    return found


def first_provider(session: Any, ort: Any) -> list[str]:
    """The session's providers; Failed unless the CUDA provider is the first (ORT's silent CPU fallback)."""
    found = list(session.get_providers())
    if not found or found[0] != CUDA_PROVIDER:
        available = ", ".join(ort.get_available_providers())
        raise Failed(
            f"ONNX Runtime fell back to {found[0] if found else 'no provider'} (session providers: {found}; "
            f"available: {available}): onnxruntime-gpu could not load CUDA/cuDNN of torch's majors, or a CPU "
            "onnxruntime is installed"
        )
    return found


@check("onnx.cpu", timeout=300.0)
def onnx_cpu(ctx: Context) -> str:
    ort = onnxruntime(ctx)
    import torch

    with restored(torch), tempfile.TemporaryDirectory(prefix="torchyard-onnx-") as folder:
        torch.set_num_threads(1)
        model, images, path = export(folder, CPU_SHAPE)
        with torch.no_grad():
            eager = model(images).numpy()
        session = ort.InferenceSession(path, providers=[CPU_PROVIDER])
        (found,) = session.run(["logits"], {"images": images.numpy()})
        difference = compare(found, eager, CPU_TOLERANCE, "CPU provider")
    ctx.observed["onnx_cpu"] = {"onnxruntime": ort.__version__, "max_difference": difference}
    return (
        f"torch.onnx.export of the small ResNet (eval), onnxruntime {ort.__version__} CPU provider matches eager "
        f"within {difference:.1e} (allowed {CPU_TOLERANCE:g})"
    )


def _per_batch(run: Any, runs: int, torch: Any, device: str) -> float:
    """Milliseconds per call of `run` after one warm-up call, timed as the suite times GPU work."""
    run()
    with Timer(torch, device) as timer:
        for _ in range(runs):
            run()
    return timer.seconds * 1000.0 / runs


@check("gpu.onnx", gpu=True, timeout=180.0)
def onnx_gpu(ctx: Context) -> str:
    torch = _cuda(ctx)
    ort = onnxruntime(ctx)
    shape, runs = (SMALL_GPU_SHAPE, SMALL_RUNS) if ctx.small else (GPU_SHAPE, RUNS)
    with restored(torch), tempfile.TemporaryDirectory(prefix="torchyard-onnx-") as folder:
        model, images, path = export(folder, shape)
        session = ort.InferenceSession(path, providers=[CUDA_PROVIDER, CPU_PROVIDER])
        providers = first_provider(session, ort)
        model, gpu_images, host = model.cuda(), images.cuda(), {"images": images.numpy()}
        with torch.inference_mode():
            eager = model(gpu_images).float().cpu().numpy()
            difference = compare(session.run(["logits"], host)[0], eager, GPU_TOLERANCE, "CUDA provider")
            timings = _latencies(torch, model, gpu_images, session, host, runs)
    ctx.observed["onnx_gpu"] = {"providers": providers, "max_difference": difference, "ms_per_batch": timings}
    said = ", ".join(f"{name} {ms:.2f} ms" for name, ms in timings.items())
    return (
        f"CUDA provider first ({', '.join(providers)}); matches eager within {difference:.1e} "
        f"(allowed {GPU_TOLERANCE:g}); per batch of {shape['batch']}: {said}"
    )


def _latencies(torch: Any, model: Any, images: Any, session: Any, host: dict[str, Any], runs: int) -> dict[str, float]:
    def amp() -> Any:
        with autocast(torch, "cuda", torch.float16, enabled=True):
            return model(images)

    def ort_run() -> Any:
        return session.run(["logits"], host)

    return {  # ORT's run returns host arrays, so it has finished when it returns: the host clock times it
        "onnxruntime_cuda": _per_batch(ort_run, runs, torch, "cpu"),
        "eager_fp32": _per_batch(lambda: model(images), runs, torch, "cuda"),
        "eager_amp_fp16": _per_batch(amp, runs, torch, "cuda"),
    }
