"""Rules on the Python, the OS base and the companions (torchvision, torchaudio) of a combination."""

from __future__ import annotations

from builder.core.kinds import Platform
from builder.resolve import nvidia_wheels
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.rules.check import Check, Missing, not_checked


def rule_python_torch(f: Facts, q: Query, c: Combination) -> Check:
    wheels = c.wheels
    if wheels is None:
        return Check(
            "python-torch", False, f"torch {c.torch.version} has no {c.platform.value} wheels", ("pypi-torch",)
        )
    ok = c.python in wheels.python
    have = f"{wheels.python[0]}-{wheels.python[-1]}"
    where = "" if c.platform is Platform.AMD64 else f" for {c.platform.value}"
    reason = (
        f"torch {c.torch.version} has cp{c.python.replace('.', '')} wheels{where}"
        if ok
        else f"torch {c.torch.version} has no wheels for Python {c.python}{where} (wheels: {have})"
    )
    return Check("python-torch", ok, reason, ("pypi-torch",))


def rule_python_os(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("distro-packages", "python-images")
    if c.python == c.os.system_python:
        return Check("python-os", True, f"{c.os.name} ships Python {c.python}", sources)
    if c.python in c.os.python_images:
        image = c.os.python_image.format(python=c.python)
        return Check("python-os", True, f"Python {c.python} from the official {image} image", sources)
    offered = ", ".join(c.os.pythons())
    return Check("python-os", False, f"{c.os.name} offers Python {offered}, not {c.python}", sources)


def rule_glibc_os(f: Facts, q: Query, c: Combination) -> Check:
    """The highest glibc floor of the wheels the venv installs: torch's, and the NVIDIA wheels its pins name
    where matrix.toml records their tags ([[nvidia_wheel]])."""
    sources = ("manylinux", "pypi-torch")
    if c.wheels is None:
        return Check("glibc-os", False, f"torch {c.torch.version} has no {c.platform.value} wheels", sources)
    tag = c.wheels.platform_tag
    floor = f.glibc_floor(tag)
    if floor is None:
        return not_checked("glibc-os", f"the glibc of platform tag {tag} is not recorded", sources, Missing.FACT)
    nvidia = nvidia_wheels.installed(f.matrix, c.variant, c.platform)
    if not nvidia:
        ok = c.os.glibc >= floor
        return Check("glibc-os", ok, f"{c.os.name} glibc {c.os.glibc} {_op(ok)} {floor} ({tag})", sources)
    top = max(nvidia, key=lambda w: f.glibc_floor(w.tag) or floor)
    need = max(floor, f.glibc_floor(top.tag) or floor)
    ok = c.os.glibc >= need
    said = f"torch {tag}; highest NVIDIA wheel: {top.label} {top.tag}"
    return Check("glibc-os", ok, f"{c.os.name} glibc {c.os.glibc} {_op(ok)} {need} ({said})", (*sources, *top.sources))


def _op(ok: bool) -> str:
    return ">=" if ok else "<"


def rule_companions(f: Facts, q: Query, c: Combination) -> Check:
    sources = ("pypi-torchvision", "pypi-torchaudio")
    for name, version in (("torchvision", c.torch.torchvision), ("torchaudio", c.torch.torchaudio)):
        problem = f.companion_problem(f.companions[name, version], c.torch.version, c.python)
        if problem is not None:
            return Check("companions", False, problem, sources)
    return Check(
        "companions",
        True,
        f"torchvision {c.torch.torchvision} and torchaudio {c.torch.torchaudio} "
        f"accept torch {c.torch.version} on Python {c.python}",
        sources,
    )
