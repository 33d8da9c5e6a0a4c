"""The one contract between the host and an image: what the image declares (`Manifest`, written to
/etc/torchyard/manifest.json at build time) and what the smoke suite read inside it (`Observed`, in its JSON
report). The plan writes a Manifest, the suite reads it and returns an Observed, and the pipeline, verify and
publish read that; none of them passes raw dicts with string keys around.

`STACK` is the one list of a combination's stack components: a new component (as nccl was) is added here,
in the plan's `stack_of` and in the check that reads it (checks_cpu.py), and every other place follows.

Standard library only and Python 3.8 compatible: it runs inside the images, the oldest of which have 3.8.
Reading is lenient in both directions: unknown keys are kept aside, missing ones are None, so a new suite
smoke-tests old images and an old manifest reader survives a new key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

SCHEMA = 1

# name -> what the value is; the order is the order of the version checks and of reports.
STACK: tuple[tuple[str, str], ...] = (
    ("torch", "torch.__version__ with its local part: 2.14.1+cu130"),
    ("torchvision", "public version: 0.29.1"),
    ("torchaudio", "public version: 2.11.1"),
    ("cuda", "torch.version.cuda, major.minor; null for a CPU build"),
    ("cudnn", "the cuDNN release: 9.24.0.43 (torch reports 92400)"),
    ("nccl", "the NCCL release: 2.30.7"),
    ("python", "major.minor of the interpreter: 3.11"),
    ("os", "ID + VERSION_ID of /etc/os-release: debian12"),
)
STACK_KEYS: tuple[str, ...] = tuple(name for name, _ in STACK)


M = TypeVar("M", bound="Manifest")


@dataclass(frozen=True)
class ManifestLayer:
    """One layer of the image's venv, in image order: its name, what it holds by rule (the plan), and the
    distributions the build found for it (`name==version`; empty in the plan, filled in the image)."""

    name: str
    rule: str = ""
    packages: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rule": self.rule, "packages": list(self.packages)}

    @classmethod
    def from_dict(cls, data: object) -> ManifestLayer | None:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        return cls(str(data["name"]), str(data.get("rule") or ""), _texts(data.get("packages")))


def _layers(value: object) -> tuple[ManifestLayer, ...]:
    found = [ManifestLayer.from_dict(item) for item in value] if isinstance(value, list) else []
    return tuple(layer for layer in found if layer is not None)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _texts(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, (list, tuple)) else ()


@dataclass(frozen=True)
class Manifest:
    """What an image declares. Every field is optional: an image torchyard did not build declares nothing."""

    # The order is the JSON's (images built before this class wrote their manifests in this order).
    schema: int = SCHEMA
    torchyard: str | None = None
    id: str | None = None
    flavor: str | None = None  # runtime | devel
    strategy: str | None = None
    torch: str | None = None
    torchvision: str | None = None
    torchaudio: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    python: str | None = None
    os: str | None = None
    base_image: str | None = None
    arch_list: tuple[str, ...] = ()  # sm_89 ...: what the image was built for
    min_driver: str | None = None
    nvidia_require_cuda: str | None = None
    immutable_tag: str | None = None
    extensions: tuple[str, ...] = ()
    # The venv's layers, most shared first (docs/render.md). Not compared: the plan's have no packages yet.
    layers: tuple[ManifestLayer, ...] = field(default=(), compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # keys this version does not know

    def stack(self) -> dict[str, str | None]:
        return {key: getattr(self, key) for key in STACK_KEYS}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = dict(self.extra)
        for item in fields(self):
            if item.name != "extra":
                value = getattr(self, item.name)
                if item.name == "layers":
                    value = tuple(layer.to_dict() for layer in value)
                data[item.name] = list(value) if isinstance(value, tuple) else value
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls: type[M], data: dict[str, Any]) -> M:
        known = {item.name for item in fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        for name in known & set(data):
            if name in ("arch_list", "extensions"):
                values[name] = _texts(data[name])
            elif name == "layers":
                values[name] = _layers(data[name])
            elif name == "schema":
                values[name] = int(data[name]) if str(data[name]).isdigit() else SCHEMA
            else:
                values[name] = _text(data[name])
        return cls(extra={k: v for k, v in data.items() if k not in known}, **values)

    @classmethod
    def from_json(cls: type[M], text: str) -> M:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a manifest is a JSON object")
        return cls.from_dict(data)

    def with_values(self, values: Mapping[str, str | None]) -> Manifest:
        """A copy with some stack values replaced (the suite's --expect-KEY flags)."""
        data = self.to_dict()
        data.update(values)
        return Manifest.from_dict(data)


@dataclass
class Observed:
    """What the smoke suite read inside an image (the report's "observed" object).

    The stack values are typed fields; what the checks add (arch verdicts, GPUs, throughput figures) stays
    in `details`, keyed by the check's own names.
    """

    torch: str | None = None
    torchvision: str | None = None
    torchaudio: str | None = None
    cuda: str | None = None
    cudnn: int | None = None  # as torch reports it: 92400
    nccl: str | None = None
    python: str | None = None
    os: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.details)
        data.update({key: getattr(self, key) for key in STACK_KEYS})
        return {k: v for k, v in data.items() if k in self.details or v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Observed:
        found = cls(details={k: v for k, v in data.items() if k not in STACK_KEYS})
        for key in STACK_KEYS:
            value = data.get(key)
            if key == "cudnn":
                found.cudnn = int(str(value)) if str(value).isdigit() else None
            else:
                setattr(found, key, _text(value))
        return found

    def cudnn_major(self) -> int | None:
        """cudnnGetVersion(): major*1000+minor*100+patch up to 8.x (8700), major*10000+... from 9 (92400)."""
        if not self.cudnn:
            return None
        return self.cudnn // 10000 if self.cudnn >= 10000 else self.cudnn // 1000
