"""Checks on a built image before anything is tagged: labels, tags from what is inside, extension code."""

from __future__ import annotations

import json
from typing import Any

from builder.archs import Arch
from builder.engine import Engine, ImageInfo
from builder.errors import BuildError
from builder.kinds import Flavor, Strategy
from builder.plan import Plan, TargetPlan
from builder.tags import suffix


def check_labels(plan: Plan, target: TargetPlan, image: ImageInfo) -> None:
    expected = dict(target.labels) | plan.build_labels()
    wrong = [
        f"{k}={image.labels.get(k)!r} (expected {v!r})" for k, v in sorted(expected.items()) if image.labels.get(k) != v
    ]
    if wrong:
        raise BuildError(f"{target.tags.immutable}: labels do not match the plan: {'; '.join(wrong[:4])}")


def observed_tag(
    observed: dict[str, Any], flavor: Flavor, strategy: Strategy, archs: tuple[Arch, ...], extras: str | None = None
) -> str:
    """The immutable tag computed from what the smoke suite read inside the image (tags.py's scheme)."""
    torch_version = str(observed.get("torch", "?"))
    public, _, local = torch_version.partition("+")
    cuda = observed.get("cuda")
    if cuda:
        cudnn = observed.get("cudnn")
        # cudnnGetVersion(): major*1000+minor*100+patch up to 8.x (8700), major*10000+... from 9 (92400).
        number = int(str(cudnn)) if str(cudnn).isdigit() else 0
        major = str(number // 10000 if number >= 10000 else number // 1000) if number else "?"
        stack = f"cuda{cuda}" + (f"-cudnn{major}" if cudnn else "")
    else:
        stack = "cpu" if local in ("", "cpu") else f"unknown-{local}"
    platform = f"py{observed.get('python', '?')}-{observed.get('os', '?')}"
    return f"{public}-{stack}-{platform}-{suffix(flavor, strategy, archs, extras)}"


def check_tag(plan: Plan, target: TargetPlan, observed: dict[str, Any]) -> None:
    seen = observed_tag(observed, target.flavor, plan.strategy, plan.custom_archs, plan.extras)
    if seen != target.tags.immutable:
        raise BuildError(f"the tag {target.tags.immutable} does not describe the image: its contents say {seen}")


_LIST_SO = (
    "import importlib, json, pathlib, sys\n"
    "out = {}\n"
    "for name in sys.argv[1:]:\n"
    "    mod = importlib.import_module(name.replace('-', '_'))\n"
    "    out[name] = [str(p) for p in pathlib.Path(mod.__file__).parent.rglob('*.so')]\n"
    "print(json.dumps(out))\n"
)


def check_extension_code(
    engine: Engine, image_id: str, extensions: tuple[str, ...], archs: tuple[Arch, ...], cuda_home: str
) -> str:
    """cuobjdump (NVIDIA's tool, in the devel image) must list a cubin for every requested architecture."""
    found = engine.run(image_id, ["python", "-c", _LIST_SO, *extensions], timeout=300)
    if found.exit_code != 0:
        raise BuildError(f"could not import the extensions in the devel image: {found.output.strip()[-400:]}")
    libraries = json.loads(found.output.strip().splitlines()[-1])
    report = []
    for name, paths in libraries.items():
        if not paths:
            raise BuildError(f"extension {name} has no compiled library")
        listing = engine.run(image_id, [f"{cuda_home}/bin/cuobjdump", "--list-elf", *paths], timeout=300)
        if listing.exit_code != 0:
            raise BuildError(f"cuobjdump failed on {name}: {listing.output.strip()[-400:]}")
        missing = [
            a.name for a in archs if f".{a.name}." not in listing.output and f".sm_{a.cmake}." not in listing.output
        ]
        if missing:
            raise BuildError(
                f"extension {name} has no code for {', '.join(missing)} (cuobjdump --list-elf found: "
                f"{' '.join(sorted(set(_elf_archs(listing.output))))})"
            )
        report.append(f"{name}: {' '.join(sorted(set(_elf_archs(listing.output))))}")
    return "; ".join(report)


def _elf_archs(listing: str) -> list[str]:
    return [part for line in listing.splitlines() for part in line.split(".") if part.startswith("sm_")]
