"""What a user's requirement may not contradict: the versions the image pins (torch, torchvision, torchaudio by
constraints.txt; the NVIDIA wheels torch itself pins exactly), and the environment a requirement's marker is
judged in. pip would refuse a contradiction only in the build, minutes later, in words that name no flag or line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.errors import RenderError
from builder.core.kinds import Platform
from builder.resolve.combos import Combination

MACHINES = {Platform.AMD64: "x86_64", Platform.ARM64: "aarch64"}


@dataclass(frozen=True)
class Pin:
    name: str  # canonical
    version: Version  # as the installed distribution's metadata says it (2.5.1+cu124 from PyTorch's index)
    by: str  # what pins it, for the message


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_pins(c: Combination) -> dict[str, Pin]:
    """Every distribution the image holds at a version a requirement must allow, by canonical name."""
    # PyTorch's own indexes name their builds 2.5.1+cu124 (torchvision 0.20.1+cu124 ...); PyPI's default build
    # has no local part in its metadata, whatever torch.__version__ says.
    local = "" if c.is_pypi_default else f"+{c.variant.name}"
    pins = [
        Pin("torch", Version(f"{c.torch.version}{local}"), "constraints.txt"),
        Pin("torchvision", Version(f"{c.torch.torchvision}{local}"), "constraints.txt"),
        Pin("torchaudio", Version(f"{c.torch.torchaudio}{local}"), "constraints.txt"),
    ]
    return {p.name: p for p in pins + _nvidia(c)}


def _nvidia(c: Combination) -> list[Pin]:
    """The NVIDIA wheels torch pins exactly, as matrix.toml records them (builder/render/layers.py groups the
    same): the CUDA runtime pin, cuDNN and NCCL."""
    v, cuda = c.variant, c.variant.cuda
    if cuda is None:
        return []
    by = f"torch {c.torch.version}"
    found = []
    if v.cuda_runtime:
        runtime = Requirement(v.cuda_runtime)
        exact = [s.version for s in runtime.specifier if s.operator == "==" and "*" not in s.version]
        found += [Pin(canonical(runtime.name), Version(x), by) for x in exact[:1]]
    if v.cudnn is not None:
        found.append(Pin(f"nvidia-cudnn-cu{cuda.major}", v.cudnn, by))
    if v.nccl is not None:
        found.append(Pin(f"nvidia-nccl-cu{cuda.major}", v.nccl, by))
    return found


def contradicted(c: Combination, name: str, specifier: str) -> Pin | None:
    """The pin a requirement `name specifier` cannot be installed beside, or None."""
    pin = image_pins(c).get(canonical(name))
    if pin is None or not specifier:
        return None
    return None if SpecifierSet(specifier).contains(pin.version, prereleases=True) else pin


def check_unpinned(c: Combination, where: str, shown: str, name: str, specifier: str) -> None:
    """Today's one line for a requirement against a pin: the flag or file:line, the requirement, the pin."""
    pin = contradicted(c, name, specifier)
    if pin is not None:
        raise RenderError(
            f"{where}: {shown!r} contradicts the image's {pin.name} {pin.version} (pinned by {pin.by}); "
            "choose the release with --torch instead"
        )


def environment(c: Combination) -> dict[str, str]:
    """The marker environment of the image's Python. Its patch release is not recorded: python_full_version is
    taken as X.Y.0 (markers name minor releases almost always: uv writes `python_full_version >= '3.12'`)."""
    full = f"{c.python}.0"
    return {
        "python_version": c.python,
        "python_full_version": full,
        "implementation_version": full,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": MACHINES[c.platform],
        "extra": "",
    }


def holds(marker: str | None, env: dict[str, str], where: str) -> bool:
    """Whether a requirement's marker holds in the image; a marker that cannot be judged is an error there."""
    if not marker:
        return True
    try:
        return Marker(marker).evaluate(env)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName) as exc:
        raise RenderError(f"{where}: marker {marker!r} cannot be judged for the image ({exc})") from None
