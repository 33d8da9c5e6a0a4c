"""The half of the GPU simulation that moves work: a TorchFunctionMode that maps `cuda` devices in torch calls
to `cpu`, marks the results of simulated GPU N (faults act on those only), rounds matmul inputs to TF32 where
the simulated GPU would, and injects the configured wrong answers. Test-only; Python >= 3.8.
"""

from __future__ import annotations

import json
import os
from typing import Any

STATE: dict[str, Any] = {"device": 0, "gpu_ops": 0}  # the current simulated device (torch.cuda.set_device /
# torch.cuda.device); how many calls ran on a simulated GPU (the profiler puts kernels in its trace after them)


def device_index(device: Any) -> int:
    if device is None:
        return int(STATE["device"])
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        return int(device.split(":", 1)[1]) if ":" in device else int(STATE["device"])
    index = getattr(device, "index", None)
    return int(STATE["device"]) if index is None else int(index)


def note(cfg: dict[str, Any], entry: dict[str, Any]) -> None:
    """With `"record": PATH`, one JSON line per recorded call, of every process (see torchyard_gpu_sim)."""
    if cfg.get("record"):
        with open(cfg["record"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(entry, pid=os.getpid())) + "\n")


def mode_class(torch: Any) -> Any:
    from torch.overrides import TorchFunctionMode

    matmuls = {torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.Tensor.matmul, torch.Tensor.__matmul__}
    matmuls |= {torch.nn.functional.linear}
    convs = {torch.nn.functional.conv2d, torch.conv2d}
    products = {torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.__matmul__}
    losses = {torch.nn.functional.cross_entropy, torch.nn.functional.nll_loss, torch.nn.functional.mse_loss}
    one_device = products | {torch.nn.functional.linear} | convs | losses

    class SimMode(TorchFunctionMode):  # type: ignore[misc]
        def __init__(self, cfg: dict[str, Any]) -> None:
            super().__init__()
            self.cfg = cfg

        def __torch_function__(self, func: Any, types_: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func is torch.Tensor.pin_memory:
                return args[0]
            if func is torch.Tensor.is_pinned:
                return True
            if func is torch.Tensor.cuda:
                device = args[1] if len(args) > 1 else kwargs.get("device")
                return self._mark(args[0].view_as(args[0]), device_index(device))
            target, args, kwargs = self._rewrite(args, kwargs)
            source = _marked(args) if target is None else target
            if func in one_device:
                _one_device(torch, args)
            if func in matmuls or func in convs or func is torch.Tensor.copy_:
                self._record(func, args, kwargs)
            if func in matmuls and source is not None and self._tf32():
                args = tuple(_tf32(torch, a) for a in args)
            out = self._cheap(func, args)
            out = func(*args, **kwargs) if out is None else out
            if func is torch.Tensor.cpu or (func is torch.Tensor.to and target is None and "cpu" in _texts(args)):
                return out.view_as(out) if out is args[0] else out  # back on the host: unmarked
            if source is None:
                return out
            STATE["gpu_ops"] += 1
            self._memory(func, out, source)
            if func is torch.Tensor.to and out is args[0]:
                out = out.view_as(out)
            out = self._faulty(func, out)
            return out if any(out is a for a in args) else self._mark(out, source)

        def _memory(self, func: Any, out: Any, source: int) -> None:
            """A GPU's memory (gpu.memory): each torch.empty recorded; a filled tensor's first or last element left 0
            by the faults memory_head and memory_tail."""
            if func is torch.empty and self.cfg.get("record"):
                nbytes = out.numel() * out.element_size()
                note(self.cfg, {"op": "empty", "gpus": [source], "bytes": [nbytes], "dtypes": [str(out.dtype)]})
            if func is torch.Tensor.fill_:
                for fault, index in (("memory_head", 0), ("memory_tail", -1)):
                    if fault in self.cfg["faults"]:
                        out.view(-1)[index] = 0

        def _faulty(self, func: Any, out: Any) -> Any:
            """A GPU op's result as the configured faults make it wrong."""
            faults = self.cfg["faults"]
            if func in matmuls and "gemm" in faults and isinstance(out, torch.Tensor):
                out = out * 1.001
            if func in matmuls and getattr(out, "dtype", None) == torch.float32:
                tf32 = self._tf32()
                if ("tf32_wrong" if tf32 else "fp32_wrong") in faults:
                    out = out * (1.05 if tf32 else 1.01)
            if func in matmuls and "fp64_wrong" in faults and getattr(out, "dtype", None) == torch.float64:
                out = out * (1 + 1e-9)
            half = (torch.float16, torch.bfloat16)
            if func in matmuls and "half_gemm" in faults and getattr(out, "dtype", None) in half:
                out = out * 1.05
            if func in convs and "conv_grad" in faults:
                out = _BadGrad(torch).apply(out)
            if func in convs and "conv_out" in faults:
                out = _BadOutput(torch).apply(out)
            return out

        def _record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            """With "record", each matmul, convolution and copy_: dtypes, shapes, bytes, each tensor's GPU, TF32
            (cuDNN's for a convolution, with cuDNN's benchmark and deterministic settings), blocking."""
            if not self.cfg.get("record"):
                return
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            copy, conv = func is torch.Tensor.copy_, func in convs
            settings = torch.backends.cudnn
            cudnn = (
                {"benchmark": bool(settings.benchmark), "deterministic": bool(settings.deterministic)} if conv else {}
            )
            note(
                self.cfg,
                {
                    "op": "copy_" if copy else "conv" if conv else "matmul",
                    "dtypes": [str(t.dtype) for t in tensors],
                    "shapes": [list(t.shape) for t in tensors],
                    "bytes": [t.numel() * t.element_size() for t in tensors],
                    "gpus": [getattr(t, "_sim_gpu", None) for t in tensors],
                    "tf32": bool((torch.backends.cudnn if conv else torch.backends.cuda.matmul).allow_tf32),
                    "non_blocking": copy and bool(kwargs.get("non_blocking", args[2] if len(args) > 2 else False)),
                    **cudnn,
                },
            )

        def _cheap(self, func: Any, args: tuple[Any, ...]) -> Any:
            """With "cheap_products_from": N, a product of two matrices with a side of N or more is not computed (a
            zero matrix of its shape): a test runs a check at a real GPU's sizes on the CPU and reads the record."""
            limit = self.cfg.get("cheap_products_from")
            if not limit or func not in products or len(args) < 2:
                return None
            if not all(isinstance(a, torch.Tensor) and a.dim() == 2 for a in args[:2]):
                return None
            a, b = args[0], args[1]
            if max(*a.shape, *b.shape) < limit:
                return None
            return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)

        def _tf32(self) -> bool:
            """TF32 rounding: asked for, on capability >= 8.0; the faults tf32_ignored (never), tf32_stuck (whether
            asked or not) and tf32_everywhere (below 8.0 too)."""
            major = self.cfg["gpus"][0].get("capability", [9, 0])[0] if self.cfg["gpus"] else 0
            faults = self.cfg["faults"]
            asked = bool(torch.backends.cuda.matmul.allow_tf32) or "tf32_stuck" in faults
            return asked and (major >= 8 or "tf32_everywhere" in faults) and "tf32_ignored" not in faults

        def _rewrite(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, Any, Any]:
            found: list[int] = []

            def fix(value: Any) -> Any:
                if isinstance(value, torch.device) and value.type == "cuda":
                    found.append(device_index(value))
                    return torch.device("cpu")
                if isinstance(value, str) and (value == "cuda" or value.startswith("cuda:")):
                    found.append(device_index(value))
                    return "cpu"
                return value

            args = tuple(fix(a) for a in args)
            kwargs = {k: fix(v) for k, v in kwargs.items() if k != "pin_memory"}
            return (found[0] if found else None), args, kwargs

        def _mark(self, out: Any, index: int) -> Any:
            """Outputs of work on simulated GPU `index` carry its number (faults act on them only)."""
            if isinstance(out, torch.Tensor):
                if f"gpu:{index}" in self.cfg["faults"] and out.is_floating_point():
                    out = torch.full_like(out, float("nan"))
                out._sim_gpu = index
            elif isinstance(out, (tuple, list)):
                for item in out:
                    if isinstance(item, torch.Tensor):
                        item._sim_gpu = index
            return out

    return SimMode


def _marked(args: Any) -> int | None:
    for value in args:
        found = getattr(value, "_sim_gpu", None)
        if found is not None:
            return int(found)
        if isinstance(value, (tuple, list)):
            inner = _marked(value)
            if inner is not None:
                return inner
    return None


def _one_device(torch: Any, args: tuple[Any, ...]) -> None:
    """A product, linear layer, convolution or loss refuses tensors on two devices, as real torch does: an unmarked
    tensor is on the host (a module's parameters are marked by its `.to`/`.cuda`, see torchyard_gpu_sim); a 0-dim
    tensor may be anywhere, as a CPU scalar may meet a GPU tensor in torch."""
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.dim() > 0]
    gpus = [getattr(t, "_sim_gpu", None) for t in tensors]
    if len(set(gpus)) > 1:
        raise RuntimeError(f"Expected all tensors to be on the same device (simulation: GPUs {gpus})")


def _texts(args: Any) -> list[str]:
    return [str(a) for a in args if isinstance(a, str) or type(a).__name__ == "device"]


def _tf32(torch: Any, value: Any) -> Any:
    """Round an fp32 tensor to TF32 (10 mantissa bits) as tensor cores read it."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return value
    bits = value.detach().contiguous().view(torch.int32)
    rounded = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return rounded if not value.requires_grad else value + (rounded - value).detach()


def _BadGrad(torch: Any) -> Any:
    class BadGrad(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad * 1.01

    return BadGrad


def _BadOutput(torch: Any) -> Any:
    """A convolution's output 1 % off, its gradients right: the backward undoes the forward's scale."""

    class BadOutput(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 1.01

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad / 1.01

    return BadOutput
