"""`torchyard doctor --check`'s probe: what torch in a container on this machine sees, as one JSON line.

Runs inside any image with torch, as `python3 -c <this file's text>` (no file is mounted): the standard library
and torch only, Python >= 3.8. The CPU part always runs; the GPU part runs on every GPU the container sees
(a matmul on each, checked against the same one on the CPU, TF32 off). A step that fails says why; none raises.
"""

from __future__ import annotations

import json
import math
import platform
import sys
from typing import Any

MARKER = "TORCHYARD-PROBE "  # the line the host reads; anything else the image prints is ignored
SIZE = 64


def cudnn_text(number: Any) -> Any:
    """torch.backends.cudnn.version(): 90100 -> 9.1.0; 8700 -> 8.7.0 (the scheme changed at 9)."""
    if not isinstance(number, int) or number <= 0:
        return None
    if number >= 10000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"


def nccl_text(torch: Any) -> Any:
    if not torch.version.cuda:
        return None
    try:
        found = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this build, or it cannot be loaded
        return None
    if isinstance(found, tuple):
        return ".".join(str(part) for part in found)
    return str(found) if found else None


def cpu_matmul(torch: Any) -> dict[str, Any]:
    """A small matmul against the same sums in plain Python: torch's CPU kernels work."""
    try:
        a = [[(i * 3 + j) % 7 - 3.0 for j in range(8)] for i in range(8)]
        b = [[(i + 2 * j) % 5 - 2.0 for j in range(8)] for i in range(8)]
        expected = [[sum(a[i][k] * b[k][j] for k in range(8)) for j in range(8)] for i in range(8)]
        got = (torch.tensor(a, dtype=torch.float64) @ torch.tensor(b, dtype=torch.float64)).tolist()
    except Exception as exc:
        return {"ok": False, "detail": f"the CPU matmul failed: {type(exc).__name__}: {exc}"}
    if got != expected:
        return {"ok": False, "detail": "the CPU matmul gave wrong numbers"}
    return {"ok": True, "detail": "an 8x8 matmul matches plain Python"}


def gpu_matmul(torch: Any, index: int) -> dict[str, Any]:
    """A float32 matmul on GPU `index`, TF32 off, against the CPU's."""
    name = "?"
    try:
        name = torch.cuda.get_device_name(index)
        generator = torch.Generator().manual_seed(index)
        a = torch.randn(SIZE, SIZE, generator=generator)
        b = torch.randn(SIZE, SIZE, generator=generator)
        expected = a @ b
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            got = (a.to(f"cuda:{index}") @ b.to(f"cuda:{index}")).cpu()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        error = float((got - expected).abs().max())
    except Exception as exc:
        return {"index": index, "name": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    ok = not math.isnan(error) and error < 1e-3
    detail = f"a {SIZE}x{SIZE} matmul matches the CPU's (max error {error:.1e})"
    return {"index": index, "name": name, "ok": ok, "detail": detail if ok else f"max error {error!r} vs the CPU"}


def probe() -> dict[str, Any]:
    found: dict[str, Any] = {"python": platform.python_version()}
    try:
        import torch
    except Exception as exc:
        found["error"] = f"import torch failed: {type(exc).__name__}: {exc}"
        return found
    found.update(torch=torch.__version__, cuda=torch.version.cuda, cpu=cpu_matmul(torch))
    try:
        found["cudnn"] = cudnn_text(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
    except Exception:
        found["cudnn"] = None
    found["nccl"] = nccl_text(torch)
    devices: list[dict[str, Any]] = []
    try:
        available = bool(torch.cuda.is_available())
        count = torch.cuda.device_count() if available else 0
    except Exception as exc:
        available, count = False, 0
        found["cuda_error"] = f"{type(exc).__name__}: {exc}"
    for index in range(count):
        devices.append(gpu_matmul(torch, index))
    found.update(cuda_available=available, device_count=count, devices=devices)
    return found


def main() -> int:
    sys.stdout.write(MARKER + json.dumps(probe()) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
