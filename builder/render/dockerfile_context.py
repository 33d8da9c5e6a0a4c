"""The template context of one image: every value the Dockerfile templates lay out, read from its ImageSpec
(builder/render/spec.py), which decided them; this module only arranges them for the templates."""

from __future__ import annotations

from typing import Any

from builder import __version__
from builder.core.kinds import Flavor
from builder.core.versions import minor_str
from builder.image.pip_guard import CONSTRAINTS
from builder.render import contract
from builder.render.additions import Additions
from builder.render.layers import LayerPlan
from builder.render.notebook import notebook_context
from builder.render.options import Extension
from builder.render.reqtypes import REQ_CONTEXT, REQ_MOUNT
from builder.render.spec import ImageSpec


def dockerfile_context(spec: ImageSpec) -> dict[str, Any]:
    """Every value the templates lay out, for the flavors the combination can have (spec.targets)."""
    c, v = spec.combination, spec.combination.variant
    available = {t.flavor for t in spec.targets}
    return {
        "torchyard_version": __version__,
        "devel": Flavor.DEVEL in available,
        "inference": Flavor.INFERENCE in available,
        "inference_pip": list(spec.inference_pip),
        "notebook": notebook_context() if Flavor.NOTEBOOK in available else None,
        "notebook_pip": list(spec.notebook_pip),
        "combo": {
            "id": c.id,
            "torch_local": c.local_version,
            "torchvision": str(c.torch.torchvision),
            "torchaudio": str(c.torch.torchaudio),
            "cuda": minor_str(v.cuda) if v.cuda else None,
            "cudnn": str(v.cudnn) if v.cudnn else None,
            "nccl": str(v.nccl) if v.nccl else None,
        },
        "strategy": spec.strategy.value,
        "arch_list": ";".join(a.cc for a in spec.archs),
        "cmake_archs": ";".join(a.cmake for a in spec.archs),
        "base_image": spec.bases.os_image,
        "toolchain_image": spec.bases.toolchain_image,
        "os": {"name": c.os.name, "apt_origin": spec.apt_origin},
        "python": "python3",
        "os_packages": list(spec.os_packages),
        "build_packages": list(spec.build_packages),
        "toolchain_packages": list(spec.toolchain_packages),
        "torch_index": spec.torch_index,
        "installer": spec.installer.value,
        "uv_pip": spec.uv_pip,
        "uv_version": spec.uv_pip.split("==", 1)[1],
        "venv_layers": [f"{i:02d}" for i in range(len(spec.layers.slots()))],
        "layer_summary": layer_summary(spec.layers),
        "manifest_files": [f"manifest-{flavor.value}.json" for flavor in Flavor if flavor in available],
        "additions": _additions_context(spec.additions),
        "nvcc": spec.nvcc,
        "nvcc_pip": spec.nvcc_pip,
        "toolchain_pip": list(spec.toolchain_pip),
        "cuda_home": spec.cuda_home,
        "cuda_major": v.cuda.major if v.cuda else None,
        "extensions": [_extension_context(e) for e in spec.extensions],
        "user": None if spec.user is None else {"name": spec.user.name, "uid": spec.user.uid},
        "image_constraints": f"/opt/torchyard/{CONSTRAINTS}",  # written by pip_guard.py in the build stage
        "targets": {flavor.value: _finish(spec, flavor) for flavor in Flavor},
    }


def _finish(spec: ImageSpec, flavor: Flavor) -> dict[str, Any]:
    """What a final stage sets: its manifest, PATH, environment and labels."""
    return {
        "manifest_file": f"manifest-{flavor.value}.json",
        "contract_file": contract.CONTEXT_FILE.format(flavor=flavor.value),
        "licenses": {"path": contract.LICENSES, "script": contract.LICENSES_SCRIPT},
        "path": spec.path(flavor),
        "env": list(spec.env(flavor)),
        "labels": spec.labels(flavor),
    }


def _extension_context(e: Extension) -> dict[str, str]:
    # The name and requirement were checked when the spec was made (spec._checked).
    if e.kind == "path":
        return {"name": e.name, "context_path": f"ext/{e.name}", "pip_arg": f"/opt/torchyard/src/{e.name}"}
    return {"name": e.name, "context_path": "constraints.txt", "pip_arg": f"'{e.spec}'"}


def _additions_context(a: Additions) -> dict[str, Any]:
    """--pip and --requirements: the files to copy, each install command's arguments, whether local sources are
    bind-mounted (from the context's req/ folder)."""
    return {"files": [name for name, _ in a.files], "installs": list(a.installs), "sources": bool(a.sources),
            "context": REQ_CONTEXT, "mount": REQ_MOUNT}  # fmt: skip


def layer_summary(plan: LayerPlan) -> str:
    """`00 venv, 01-04 cuda-runtime, ...`: the Dockerfile's comment over the venv's COPY lines."""
    parts, index = [], 0
    for group in plan.groups:
        last = index + group.slots - 1
        parts.append(f"{index:02d}{f'-{last:02d}' if last > index else ''} {group.name}")
        index = last + 1
    return ", ".join(parts)
