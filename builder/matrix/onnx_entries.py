"""The inference images' facts in matrix.toml: [[onnxruntime]] (ONNX Runtime releases on PyPI, with the CUDA and
cuDNN majors they are built for) and [[onnx_tool]] (torch.onnx's exporter packages)."""

from __future__ import annotations

from typing import Any

from builder.core.kinds import Platform
from builder.matrix import reader as r
from builder.matrix.entries import python_list
from builder.matrix.model import OnnxRuntime, OnnxTool
from builder.matrix.reader import Entry

_ORT_PACKAGES = ("onnxruntime", "onnxruntime-gpu")


def _platforms(value: Any) -> tuple[Platform, ...]:
    """["amd64", "arm64"]: the sub-table names matrix.toml uses for platforms."""
    found = []
    for name in r.text_list(value):
        platform = Platform.of_machine(name)
        if platform is None or name != platform.arch:
            raise ValueError(f"{name!r} is not one of {', '.join(p.arch for p in Platform)}")
        found.append(platform)
    return tuple(found)


def onnxruntime(e: Entry) -> OnnxRuntime:
    package = e.get("package", r.text)
    if package not in _ORT_PACKAGES:
        e.fail_key("package", f"{package!r} is not one of {', '.join(_ORT_PACKAGES)}")
    gpu = package == "onnxruntime-gpu"
    if not gpu and ("cuda_major" in e.raw or "cudnn_major" in e.raw):
        e.fail_key("cuda_major" if "cuda_major" in e.raw else "cudnn_major", "the CPU package has no CUDA or cuDNN")
    return OnnxRuntime(
        package=package,
        version=e.get("version", r.version),
        cuda_major=e.get("cuda_major", r.integer) if gpu else None,
        cudnn_major=e.get("cudnn_major", r.integer) if gpu else None,
        python=e.get("python", python_list),
        platforms=e.get("platforms", _platforms),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def onnx_tool(e: Entry) -> OnnxTool:
    return OnnxTool(
        name=e.get("name", r.text),
        version=e.get("version", r.version),
        python=e.get("python", r.spec),
        torch=e.get("torch", r.spec),
        platforms=e.get("platforms", _platforms),
        sources=e.get("source", r.sources),
    )
