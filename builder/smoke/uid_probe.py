"""hygiene.uid's probe, inside the image as a user it does not name (`python <smoke dir> --smoke-helper uid-probe
CONFIG`): import torch, a tiny torch.compile on the CPU, one DataLoader worker, a file written to $HOME and one to
/tmp. It prints one JSON line, {"steps": [[name, status, message], ...]}, and exits 1 when a step failed. The host
starts it twice (builder/pipeline/uid_run.py): as UID 1010 with group 0, then also with a read-only root and a
tmpfs /tmp, the way OpenShift runs images.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from .checks_compile import COMPILE_TOLERANCE, _fast_inductor, _first_line
from .checks_data import Squares
from .framework import FAIL, PASS, SKIP, Failed, Skipped


def _import() -> str:
    import torch

    return f"torch {torch.__version__}"


def _compile() -> str:
    """Two layers (a matmul, tanh, a matmul) compiled by Inductor for the CPU, against eager."""
    import torch

    if not hasattr(torch, "compile"):
        raise Skipped(f"torch {torch.__version__} has no torch.compile")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        raise Skipped("no C++ compiler on PATH: Inductor cannot compile for the CPU here (as compile.cpu says)")
    torch.manual_seed(0)
    first, second, x = torch.randn(16, 16), torch.randn(16, 4), torch.randn(8, 16)

    def layers(value: Any) -> Any:
        return torch.tanh(value @ first) @ second

    try:
        with _fast_inductor():
            error = float((torch.compile(layers)(x) - layers(x)).abs().max().item())
    except Exception as exc:  # Inductor's errors are long: the first line names the cause
        raise Failed(f"torch.compile failed: {_first_line(exc)}") from None
    if not error <= COMPILE_TOLERANCE:
        raise Failed(f"compiled differs from eager by {error:.2e}")
    return f"compiled on the CPU, {error:.1e} from eager"


def _dataloader() -> str:
    import torch

    loader = torch.utils.data.DataLoader(Squares(8), batch_size=4, num_workers=1)
    total = sum(float(batch[:, 0, 0, 0].sum().item()) for batch in loader)
    if total != sum(range(8)):
        raise Failed(f"the worker's batches sum to {total}, expected {sum(range(8))}")
    return "1 worker, 2 batches"


def _write(folder: str) -> str:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".torchyard-uid-") as handle:
            handle.write(b"probe")
            handle.flush()
    except OSError as exc:
        raise Failed(f"cannot write to {folder}: {exc.strerror or exc}") from None
    return f"wrote to {folder}"


STEPS: list[tuple[str, Callable[[], str]]] = [
    ("import torch", _import),
    ("torch.compile", _compile),
    ("DataLoader", _dataloader),
    ("$HOME", lambda: _write(os.environ.get("HOME") or "/")),
    ("/tmp", lambda: _write("/tmp")),
]


def step(name: str, func: Callable[[], str]) -> list[str]:
    try:
        return [name, PASS, func()]
    except Skipped as exc:
        return [name, SKIP, str(exc)]
    except Failed as exc:
        return [name, FAIL, str(exc)]
    except Exception as exc:
        return [name, FAIL, f"{type(exc).__name__}: {exc}"[:300]]


def main(config: dict[str, Any]) -> int:
    steps = [step(name, func) for name, func in STEPS]
    print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "home": os.environ.get("HOME"), "steps": steps}))
    return 1 if any(status == FAIL for _, status, _ in steps) else 0
