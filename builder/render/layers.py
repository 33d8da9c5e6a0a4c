"""The venv's layers: which distributions go in which layer, in which order (docs/render.md, "The venv's layers").

A torch wheel pins its CUDA libraries exactly (Requires-Dist `nvidia-cudnn-cu13==9.24.0.43`, `cuda-toolkit[...]==
13.0.3`, ...), and matrix.toml records those pins per variant (`cuda_runtime`, `cudnn`, `nccl`, read from the
wheels by `matrix sync` / `matrix verify`). What changes together goes in one group of layers; the groups go
from the most shared to the least:

    venv          the files no distribution owns (interpreter links, pyvenv.cfg): one per Python
    cuda-runtime  the CUDA runtime pin the matrix records and what it pins exactly: changes with the CUDA release
    pinned        every other distribution torch pins (== or ~=: cuSPARSELt, NVSHMEM, triton, ...)
    cudnn, nccl   the cuDNN and NCCL pins the matrix records: they move with most torch minor releases
    torch         torch itself
    packages      torchvision, torchaudio and everything else the install resolved

The user's --pip / --requirements come after, in a layer of their own (templates/partials/venv.j2). Which
distribution lands where is decided inside the build from what was really installed (builder/image/
venv_layers.py): this module only says how, so a new pin shows up in its layer without a code change.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import Requirement

from builder.resolve.combos import Combination
from builder.smoke.manifest import ManifestLayer

VENV = "/opt/venv"
SPLIT_SCRIPT = "venv_layers.py"  # the context file (builder/image/venv_layers.py)
PLAN_FILE = "venv-layers.json"
LABEL = "io.torchyard.layers"
# How NVIDIA names the wheels that carry the cuDNN and NCCL the matrix records (the names `matrix verify` and
# `matrix sync` read those pins under: builder/upstream/claims.py).
CUDNN_DIST = r"nvidia-cudnn-cu\d+"
NCCL_DIST = r"nvidia-nccl-cu\d+"
# Slots per group: a CUDA runtime pin brings about a dozen libraries (2.3 GB for cuda-toolkit 13.0.3), torch's
# other pins up to fifteen for CUDA 12 wheels; a layer each would be too many, one layer too coarse to pull in
# parallel. A group's members take one slot each while they fit (docs/render.md).
CUDA_RUNTIME_SLOTS = 4
PINNED_SLOTS = 6

Select = Literal["dist", "pins", "rest", "unowned"]


@dataclass(frozen=True, kw_only=True)
class LayerGroup:
    name: str
    select: Select
    rule: str  # what the group holds, in words (the manifest's `rule`)
    slots: int = 1
    match: str | None = None  # dist: a regular expression over normalised distribution names
    closure: bool = True  # dist: and what the matched distributions pin exactly
    of: str | None = None  # pins: whose pins
    pin: str | None = None  # the pin the matrix records for this group, for the label

    def slot_names(self) -> tuple[str, ...]:
        return (self.name,) if self.slots == 1 else tuple(f"{self.name}.{i + 1}" for i in range(self.slots))


@dataclass(frozen=True)
class LayerPlan:
    venv: str
    groups: tuple[LayerGroup, ...]

    def slots(self) -> tuple[tuple[str, LayerGroup], ...]:
        """(layer name, its group) in image order."""
        return tuple((name, g) for g in self.groups for name in g.slot_names())

    def to_json(self) -> str:
        """What the build stage's venv_layers.py reads."""
        groups = [{k: v for k, v in vars(g).items() if v is not None and k not in ("rule", "pin")} for g in self.groups]
        return json.dumps({"schema": 1, "venv": self.venv, "groups": groups}, indent=2) + "\n"

    def label(self) -> str:
        """The io.torchyard.layers label: each venv layer in image order, with the pin the matrix records for it."""
        return " ".join(f"{name}={g.pin}" if g.pin else name for name, g in self.slots())

    def manifest_layers(self) -> tuple[ManifestLayer, ...]:
        """The manifest's layers as planned: the build fills in the packages it found."""
        return tuple(ManifestLayer(name=name, rule=g.rule) for name, g in self.slots())


def layer_plan(c: Combination) -> LayerPlan:
    v = c.variant
    groups = [LayerGroup(name="venv", select="unowned", rule="files no distribution owns: the venv itself")]
    if v.cuda_runtime:
        runtime = Requirement(v.cuda_runtime)
        groups.append(
            LayerGroup(
                name="cuda-runtime",
                select="dist",
                match=re.escape(canonical(runtime.name)),
                slots=CUDA_RUNTIME_SLOTS,
                rule=f"{v.cuda_runtime} and what it pins exactly",
                pin=f"{canonical(runtime.name)}{runtime.specifier}",
            )
        )
    groups.append(
        LayerGroup(
            name="pinned",
            select="pins",
            of="torch",
            slots=PINNED_SLOTS if v.cuda is not None else 1,
            rule="the other distributions torch pins (== or ~=), and what they pin exactly",
        )
    )
    if v.cuda is not None and v.cudnn is not None:
        groups.append(_library("cudnn", CUDNN_DIST, f"cuDNN {v.cudnn}: nvidia-cudnn-cu{v.cuda.major}", str(v.cudnn)))
    if v.cuda is not None and v.nccl is not None:
        groups.append(_library("nccl", NCCL_DIST, f"NCCL {v.nccl}: nvidia-nccl-cu{v.cuda.major}", str(v.nccl)))
    groups += [
        LayerGroup(name="torch", select="dist", match="torch", closure=False, rule="torch", pin=str(c.torch.version)),
        LayerGroup(name="packages", select="rest", rule="torchvision, torchaudio and every other distribution"),
    ]
    return LayerPlan(VENV, tuple(groups))


def _library(name: str, dist: str, what: str, version: str) -> LayerGroup:
    return LayerGroup(name=name, select="dist", match=dist, rule=f"{what}, as torch pins it", pin=version)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
