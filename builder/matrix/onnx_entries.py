"""The inference and notebook images' facts in matrix.toml: [[onnxruntime]] (ONNX Runtime releases on PyPI, with the
CUDA and cuDNN majors they are built for and, per platform, the GPU code of their CUDA provider), [[onnx_tool]]
(torch.onnx's exporter packages) and [[notebook_tool]] (JupyterLab, ipykernel, ipywidgets)."""

from __future__ import annotations

import re
from typing import Any

from builder.core.kinds import Platform
from builder.matrix import reader as r
from builder.matrix.entries import python_list
from builder.matrix.model import NotebookTool, OnnxRuntime, OnnxTool, WheelCode
from builder.matrix.reader import Entry

_ORT_PACKAGES = ("onnxruntime", "onnxruntime-gpu")
_CODE_KEYS = ("sass", "ptx", "wheel", "sha256", "source")
_SHA256 = re.compile(r"^[0-9a-f]{64}$", re.ASCII)


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
    version = e.get("version", r.version)
    platforms = e.get("platforms", _platforms)
    return OnnxRuntime(
        package=package,
        version=version,
        cuda_major=e.get("cuda_major", r.integer) if gpu else None,
        cudnn_major=e.get("cudnn_major", r.integer) if gpu else None,
        python=e.get("python", python_list),
        platforms=platforms,
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
        code=tuple(_code(e, p, f"onnxruntime_gpu-{version}-") for p in Platform if p.arch in e.raw),
    )


def _code(e: Entry, platform: Platform, prefix: str) -> WheelCode:
    """[onnxruntime.<platform>]: the GPU code read from one of that platform's onnxruntime-gpu wheels."""
    if e.raw.get("package") != "onnxruntime-gpu":
        e.fail_key(platform.arch, "the CPU package has no GPU code")
    if platform not in e.get("platforms", _platforms):
        e.fail_key(platform.arch, f"the release records no {platform.value} wheels (platforms)")
    sub = Entry(e.ctx, (*e.path, platform.arch), f"{e.label}.{platform.arch}", e.raw[platform.arch], _CODE_KEYS)
    wheel = sub.get("wheel", r.text)
    if not wheel.startswith(prefix) or not wheel.endswith(f"_{platform.machine}.whl"):
        sub.fail_key("wheel", f"{wheel!r} is not one of this release's {platform.machine} wheels ({prefix}...)")
    sha256 = sub.get("sha256", r.text)
    if not _SHA256.match(sha256):
        sub.fail_key("sha256", f"expected 64 lower-case hex digits, found {sha256!r}")
    return WheelCode(
        platform=platform,
        sass=sub.get("sass", r.arch_list),
        ptx=sub.get("ptx", r.arch_list),
        wheel=wheel,
        sha256=sha256,
        sources=sub.get("source", r.sources),
    )


def notebook_tool(e: Entry) -> NotebookTool:
    return NotebookTool(
        name=e.get("name", r.text),
        version=e.get("version", r.version),
        python=e.get("python", r.spec),
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
