"""The public JSON shapes of lookup and explain (a contract for scripts and CI: add, never rename)."""

from __future__ import annotations

from typing import Any

from builder.core.versions import minor_str
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.resolver import Explanation, Result
from builder.resolve.rules.check import Check
from builder.resolve.verdict import check_json, verdict


def index_url(c: Combination) -> str | None:
    """Where pip finds this wheel: PyPI for the default variant, PyTorch's index for the others."""
    return None if c.is_pypi_default else f"https://download.pytorch.org/whl/{c.variant.name}"


def min_driver(f: Facts, c: Combination) -> str | None:
    """The oldest driver this combination runs on without forward compatibility."""
    cuda = c.variant.cuda
    if cuda is None:
        return None
    floor = f.mvc_floor(cuda.major) or f.full_driver(cuda)
    return str(floor) if floor else None


def result_json(f: Facts, r: Result) -> dict[str, Any]:
    c, v = r.combo, r.combo.variant
    data: dict[str, Any] = {
        "id": c.id,
        "torch": str(c.torch.version),
        "torch_local": c.local_version,
        "torchvision": str(c.torch.torchvision),
        "torchaudio": str(c.torch.torchaudio),
        "variant": v.name,
        "cuda": minor_str(v.cuda) if v.cuda else None,
        "cudnn": str(v.cudnn) if v.cudnn else None,
        "nccl": str(v.nccl) if v.nccl else None,
        "python": c.python,
        "os": c.os.name,
        "pypi_default": c.is_pypi_default,
        "index_url": index_url(c),
        "min_driver": min_driver(f, c),
        "driver_mode": r.driver_mode.value if r.driver_mode else None,
        "sass": [a.name for a in v.sass] if v.sass is not None else None,
        "ptx": [a.name for a in v.ptx],
    }
    if r.arch_support is not None:
        data["arch_support"] = r.arch_support.value
        data["arch_code"] = r.arch_code.name if r.arch_code else None
    return data


def verdict_json(checks: tuple[Check, ...], *, here: bool = False) -> dict[str, Any]:
    v = verdict(checks, here=here)
    return {"verdict": v.answer.value, "conditions": list(v.conditions), "to_tell": list(v.unknown)}


def verdict_line(checks: tuple[Check, ...], *, here: bool = False) -> str:
    """The answer as lookup's first row words it: RUNS, RUNS WITH its conditions, WILL NOT RUN, or CANNOT TELL and
    what to give or record to tell (the compatibility page shows it with each image)."""
    v = verdict(checks, here=here)
    return v.words + (": " + "; ".join(v.unknown) if v.unknown else "")


def explanation_json(e: Explanation, *, here: bool = False) -> dict[str, Any]:
    return {
        "id": e.id,
        "valid": e.valid,
        **verdict_json(e.checks, here=here),
        "pinned": list(e.pinned),
        "checks": [check_json(c) for c in e.checks],
    }
