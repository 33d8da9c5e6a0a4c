"""Checks on a built image before anything is tagged: labels, tags from what is inside, extension code."""

from __future__ import annotations

import json

from builder.core.archs import Arch
from builder.core.errors import BuildError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.engine import Engine, ImageInfo
from builder.pipeline.plan import Plan, TargetPlan
from builder.render.tags import platform_suffix, suffix
from builder.smoke.manifest import Observed


def check_labels(plan: Plan, target: TargetPlan, image: ImageInfo) -> None:
    expected = dict(target.labels) | plan.build_labels()
    wrong = [
        f"{k}={image.labels.get(k)!r} (expected {v!r})" for k, v in sorted(expected.items()) if image.labels.get(k) != v
    ]
    if wrong:
        raise BuildError(f"{target.tags.immutable}: labels do not match the plan: {'; '.join(wrong[:4])}")
    wanted = plan.combination.platform.value
    if image.platform != wanted:
        raise BuildError(f"{target.tags.immutable}: the engine built a {image.platform} image, not {wanted}")


def observed_tag(
    observed: Observed,
    flavor: Flavor,
    strategy: Strategy,
    archs: tuple[Arch, ...],
    extras: str | None = None,
    *,
    machine: str = "x86_64",
) -> str:
    """The immutable tag computed from what the smoke suite read inside the image (tags.py's scheme); `machine`
    is what Python's platform.machine() said in there (aarch64: the tag ends in -arm64)."""
    public, _, local = (observed.torch or "?").partition("+")
    if observed.cuda:
        major = observed.cudnn_major()
        stack = f"cuda{observed.cuda}" + (f"-cudnn{major if major else '?'}" if observed.cudnn is not None else "")
    else:
        stack = "cpu" if local in ("", "cpu") else f"unknown-{local}"
    platform = f"py{observed.python or '?'}-{observed.os or '?'}"
    found = Platform.of_machine(machine) if machine else None
    where = platform_suffix(found) if found else f"-unknown-{machine or 'machine'}"
    return f"{public}-{stack}-{platform}-{suffix(flavor, strategy, archs, extras)}{where}"


def check_tag(plan: Plan, target: TargetPlan, observed: Observed, machine: str) -> None:
    """The planned immutable tag must be the one the image's contents give, its platform included: an image
    that says x86_64 inside never carries an arm64 tag (an emulated build that fell back to the wrong base)."""
    seen = observed_tag(observed, target.flavor, plan.strategy, plan.custom_archs, plan.extras, machine=machine)
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
