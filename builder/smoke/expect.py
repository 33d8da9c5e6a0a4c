"""What the image should contain: from its manifest (/etc/torchyard/manifest.json) or from flags."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expectations:
    torch: str | None = None  # with local part: 2.14.1+cu130
    torchvision: str | None = None
    torchaudio: str | None = None
    cuda: str | None = None  # major.minor, or None for cpu builds
    cudnn: str | None = None  # 9.24.0.43
    nccl: str | None = None  # 2.30.7
    python: str | None = None  # 3.11
    os: str | None = None  # debian12
    flavor: str | None = None  # runtime | devel
    arch_list: tuple[str, ...] = ()  # sm_89 ...: what the image was built for
    min_driver: str | None = None
    extensions: tuple[str, ...] = ()
    source: str = "none"
    cpu_build: bool = field(default=False)


def load(path: str | None, overrides: dict[str, str | None]) -> Expectations:
    data: dict[str, object] = {}
    source = "none"
    if path:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        source = path
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
            source = source if source != "none" else "flags"
    torch = _str(data.get("torch"))
    return Expectations(
        torch=torch,
        torchvision=_str(data.get("torchvision")),
        torchaudio=_str(data.get("torchaudio")),
        cuda=_str(data.get("cuda")),
        cudnn=_str(data.get("cudnn")),
        nccl=_str(data.get("nccl")),
        python=_str(data.get("python")),
        os=_str(data.get("os")),
        flavor=_str(data.get("flavor")),
        arch_list=_strings(data.get("arch_list")),
        min_driver=_str(data.get("min_driver")),
        extensions=_strings(data.get("extensions")),
        source=source,
        cpu_build=bool(torch and torch.endswith("+cpu")),
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def public(version: str) -> str:
    """2.11.1+cu132 -> 2.11.1 (some companion wheels carry a local tag of their own)."""
    return version.split("+", 1)[0]


def cudnn_number(version: str) -> int:
    """The integer torch.backends.cudnn.version() reports: 9.24.0 -> 92400, 8.7.0 -> 8700."""
    major, minor, patch = (int(p) for p in version.split(".")[:3])
    return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch


_ARCH = re.compile(r"^(?:sm_|compute_)(\d+)(\d)([af]?)$")


def arch_key(name: str) -> tuple[int, int] | None:
    match = _ARCH.match(name)
    return (int(match[1]), int(match[2])) if match else None
