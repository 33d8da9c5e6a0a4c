"""The template context of one combination: every value the Dockerfile templates lay out, computed by the
small functions of builder.render.context (the templates only lay them out)."""

from __future__ import annotations

from typing import Any

from builder import __version__
from builder.core import safety
from builder.core.archs import Arch
from builder.core.kinds import Flavor, Strategy
from builder.core.versions import minor_str
from builder.render import context as ctx
from builder.render.layers import LayerPlan, layer_plan
from builder.render.options import Extension, RenderOptions
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts


def dockerfile_context(
    f: Facts,
    c: Combination,
    options: RenderOptions,
    archs: tuple[Arch, ...],
    bases: ctx.Bases,
    nvcc: tuple[str, ...] | None,
    labels: dict[Flavor, tuple[tuple[str, str], ...]],
) -> dict[str, Any]:
    """Every value the templates lay out, for the flavors the combination can have (`labels` has them)."""
    home = ctx.cuda_home(c, options.strategy) if nvcc or options.strategy is Strategy.CUDA_BASE else None
    env = ctx.nvidia_env(f, c, bases)
    finish = {
        flavor.value: {
            "manifest_file": f"manifest-{flavor.value}.json",
            "path": ctx.target_path(flavor, home),
            "env": env + ([("CUDA_HOME", home)] if home and flavor is Flavor.DEVEL else []),
            "labels": labels.get(flavor, ()),
        }
        for flavor in Flavor
    }
    v = c.variant
    return {
        "torchyard_version": __version__,
        "devel": Flavor.DEVEL in labels,
        "combo": {
            "id": c.id,
            "torch_local": c.local_version,
            "torchvision": str(c.torch.torchvision),
            "torchaudio": str(c.torch.torchaudio),
            "cuda": minor_str(v.cuda) if v.cuda else None,
            "cudnn": str(v.cudnn) if v.cudnn else None,
            "nccl": str(v.nccl) if v.nccl else None,
        },
        "strategy": options.strategy.value,
        "arch_list": ";".join(a.cc for a in archs),
        "cmake_archs": ";".join(a.cmake for a in archs),
        "base_image": bases.os_image,
        "toolchain_image": bases.toolchain_image,
        "os": {"name": c.os.name, "apt_origin": ctx.APT_ORIGINS.get(c.os.family, "http://deb.debian.org")},
        "python": "python3",
        "os_packages": ctx.os_packages(c, bases.system_python),
        "build_packages": ctx.build_packages(bases.system_python),
        "toolchain_packages": ctx.toolchain_packages(bases.system_python),
        "torch_index": ctx.torch_index(c, options),
        "installer": options.installer.value,
        "uv_pip": ctx.UV_PIP,
        "venv_layers": [f"{i:02d}" for i in range(len(layer_plan(c).slots()))],
        "layer_summary": layer_summary(layer_plan(c)),
        "manifest_files": [f"manifest-{flavor.value}.json" for flavor in Flavor if flavor in labels],
        "extra_pip": [ctx.unpinned(c, "--pip", p) for p in options.extra_pip],
        "requirements": options.requirements is not None,
        "nvcc": bool(nvcc) or (options.strategy is Strategy.CUDA_BASE and v.cuda is not None),
        "nvcc_pip": nvcc,
        "toolchain_pip": ctx.toolchain_pip(nvcc),
        "cuda_home": home,
        "cuda_major": v.cuda.major if v.cuda else None,
        "extensions": [_extension_context(e) for e in options.extensions],
        "user": ctx.user_of(options),
        "targets": finish,
    }


def _extension_context(e: Extension) -> dict[str, str]:
    safety.check("--extension", e.name, safety.PIP_REQUIREMENT, "my_ext")
    if e.kind == "path":
        return {"name": e.name, "context_path": f"ext/{e.name}", "pip_arg": f"/opt/torchyard/src/{e.name}"}
    requirement = safety.check("--extension", e.spec, safety.PIP_REQUIREMENT, "flash-attn==2.7.4")
    return {"name": e.name, "context_path": "constraints.txt", "pip_arg": f"'{requirement}'"}


def layer_summary(plan: LayerPlan) -> str:
    """`00 venv, 01-04 cuda-runtime, ...`: the Dockerfile's comment over the venv's COPY lines."""
    parts, index = [], 0
    for group in plan.groups:
        last = index + group.slots - 1
        parts.append(f"{index:02d}{f'-{last:02d}' if last > index else ''} {group.name}")
        index = last + 1
    return ", ".join(parts)
