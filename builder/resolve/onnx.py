"""Which ONNX Runtime an inference image of a combination takes, and why a pinned one does not fit.

onnxruntime-gpu is built for one CUDA major and one cuDNN major (the nvidia-* wheels its `cuda` / `cudnn` extras
name). The image does not install those extras: ORT loads the CUDA and cuDNN libraries torch's wheels brought
(ORT's CUDA EP page: it reuses what PyTorch loaded when the majors match). So its majors must be torch's; one
built for another CUDA major would need a second CUDA major in the venv (or fail to load), and is refused.
A CPU torch takes the CPU package `onnxruntime`. The render and the rule `onnxruntime` both ask `choose`; the rule
`onnxruntime-arch` checks that the release it takes has code for the GPUs asked (the image's tag names the
combination, not a GPU, so the choice does not depend on the GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from builder.matrix.model import Matrix, OnnxRuntime, OnnxTool
from builder.resolve.combos import Combination

SOURCES = ("pypi-onnxruntime-gpu", "ort-127-cuda13", "ort-cuda-ep")
CPU_SOURCES = ("pypi-onnxruntime",)


@dataclass(frozen=True)
class OrtChoice:
    """The release taken (None: none fits), why, and whether the matrix lacked a fact to tell (`unrecorded`)."""

    release: OnnxRuntime | None
    reason: str
    sources: tuple[str, ...]
    unrecorded: bool = False


def package_of(c: Combination) -> str:
    return "onnxruntime" if c.variant.cuda is None else "onnxruntime-gpu"


def problem(r: OnnxRuntime, c: Combination) -> str | None:
    """Why this ONNX Runtime release does not go into this combination's venv (None: it does)."""
    v = c.variant
    if r.package != package_of(c):
        want = "a CUDA" if r.package == "onnxruntime-gpu" else "a CPU"
        return f"{r.id} is for {want} torch; torch {c.local_version} takes {package_of(c)}"
    if v.cuda is not None and r.cuda_major != v.cuda.major:
        return (
            f"{r.id} is built for CUDA {r.cuda_major} (its cuda extra: CUDA {r.cuda_major} wheels); torch "
            f"{c.local_version} loads CUDA {v.cuda.major}: a second CUDA major in the venv"
        )
    if v.cudnn is not None and r.cudnn_major != v.cudnn.major:
        return f"{r.id} is built for cuDNN {r.cudnn_major}; torch {c.local_version} loads cuDNN {v.cudnn.major}"
    if c.python not in r.python:
        return f"{r.id} has no cp{c.python.replace('.', '')} wheels (Python {r.python[0]}-{r.python[-1]})"
    if c.platform not in r.platforms:
        return f"{r.id} has no {c.platform.value} wheels"
    return None


def choose(m: Matrix, c: Combination, pin: Version | None = None) -> OrtChoice:
    """The newest recorded release that fits (or the pinned one, checked)."""
    sources = SOURCES if c.variant.cuda is not None else CPU_SOURCES
    if c.variant.cuda is not None and c.variant.cudnn is None:
        reason = f"torch {c.local_version}'s cuDNN is not recorded: onnxruntime-gpu's cuDNN major cannot be matched"
        return OrtChoice(None, reason, sources, unrecorded=True)
    package = package_of(c)
    recorded = [r for r in m.onnxruntime if r.package == package and (pin is None or r.version == pin)]
    if not recorded:
        what = f"{package}=={pin}" if pin is not None else f"any {package} release"
        return OrtChoice(None, f"matrix.toml does not record {what}", sources, unrecorded=True)
    newest = sorted(recorded, key=lambda r: r.version, reverse=True)
    fits = next((r for r in newest if problem(r, c) is None), None)
    if fits is not None:
        return OrtChoice(fits, _fits(fits, c), sources)
    if pin is not None:
        return OrtChoice(None, str(problem(newest[0], c)), sources)
    # The nearest: the newest built for torch's CUDA major (what the venv can load), else the newest.
    same = [r for r in newest if r.cuda_major == (c.variant.cuda.major if c.variant.cuda else None)]
    nearest = (same or newest)[0]
    return OrtChoice(None, f"no recorded {package} release fits: {problem(nearest, c)}", sources)


def _fits(r: OnnxRuntime, c: Combination) -> str:
    v = c.variant
    if v.cuda is None:
        return f"{r.id} (CPU) has cp{c.python.replace('.', '')} wheels for {c.platform.value}"
    return (
        f"{r.id} is built for CUDA {r.cuda_major} / cuDNN {r.cudnn_major}, the majors torch {c.local_version} "
        f"loads; cp{c.python.replace('.', '')} wheels for {c.platform.value}"
    )


def tools(m: Matrix, c: Combination) -> tuple[OnnxTool, ...]:
    """torch.onnx's exporter packages this torch release needs that have wheels for the combination."""
    return tuple(
        t
        for t in m.onnx_tools
        if c.torch.version in t.torch and Version(c.python) in t.python and c.platform in t.platforms
    )


def packages(m: Matrix, c: Combination, found: OrtChoice | None = None) -> tuple[str, ...]:
    """The inference image's pins in install order: torch.onnx's exporter packages, then the ONNX Runtime
    `choose` takes (left out when none fits). What render installs and lookup's pip line names."""
    found = found or choose(m, c)
    ort = (*provider_libraries(c), found.release.id) if found.release is not None else ()
    return (*(f"{t.name}=={t.version}" for t in tools(m, c)), *ort)


def provider_libraries(c: Combination) -> tuple[str, ...]:
    """What ONNX Runtime's CUDA provider links that torch's CUDA 13 pin may leave out: libcurand (torch 2.15's
    cuda-toolkit pin has no curand component; the provider fails to load without it). Taken from the same
    cuda-toolkit release torch pins, so the image's constraints hold; a no-op where torch's pin has it already."""
    pin = c.variant.cuda_runtime or ""
    name, _, version = pin.partition("==")
    return (f"cuda-toolkit[curand]=={version}",) if name == "cuda-toolkit" and version else ()
