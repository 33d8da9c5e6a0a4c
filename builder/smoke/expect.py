"""What the image should contain: from its manifest (/etc/torchyard/manifest.json) or from flags."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .manifest import Manifest


@dataclass(frozen=True)
class Expectations(Manifest):
    """The image's manifest with the flags applied, and where it came from (a path, "flags" or "none")."""

    source: str = "none"

    @property
    def cpu_build(self) -> bool:
        return bool(self.torch and self.torch.endswith("+cpu"))


def load(path: str | None, overrides: dict[str, str | None]) -> Expectations:
    manifest, source = Manifest(), "none"
    if path:
        with open(path, encoding="utf-8") as handle:
            manifest = Manifest.from_json(handle.read())
        source = path
    flags = {key: value for key, value in overrides.items() if value is not None}
    if flags:
        manifest = manifest.with_values(flags)
        source = source if source != "none" else "flags"
    return Expectations.from_dict(dict(manifest.to_dict(), source=source))


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
