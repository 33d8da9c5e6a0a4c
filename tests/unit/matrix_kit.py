"""Test helpers: a small valid matrix as TOML text, targeted edits of it, and combination pickers.

The small matrix copies real facts (compat-facts.md) for torch 2.5.1 so that rule tests on it read
like the real thing; tests that need the whole picture load the real matrix.toml instead.
"""

from __future__ import annotations

from builder.core.kinds import Platform
from builder.matrix.loader import load_matrix, parse_text
from builder.matrix.model import Matrix, OSBase
from builder.resolve.combos import Combination
from builder.resolve.query import Query, RawQuery, parse_query

BASE = """\
schema = 1

[sources.nv]
title = "NVIDIA documentation"
url = "https://docs.nvidia.com/"
confidence = "verified"

[sources.pypi]
title = "PyPI"
url = "https://pypi.org/"
confidence = "secondary"

[[cuda_major]]
major = 11
mvc_min_driver = "450.80.02"
source = "nv"

[[cuda_major]]
major = 12
mvc_min_driver = "525.60.13"
source = "nv"

[[driver_branch]]
branch = 520
reports_cuda = "11.8"
source = "nv"

[[driver_branch]]
branch = 525
reports_cuda = "12.0"
source = "nv"

[[driver_branch]]
branch = 550
reports_cuda = "12.4"
source = "nv"

[[cuda]]
version = "11.8.0"
min_driver = "520.61.05"
source = "nv"

[[cuda]]
version = "12.0.0"
min_driver = "525.60.13"
source = "nv"

[[cuda]]
version = "12.4.1"
min_driver = "550.54.15"
source = "nv"

[[arch]]
name = "sm_37"
family = "Kepler"
nvcc_removed = "12.0"
datacenter_gpus = ["Tesla K80"]
source = "nv"

[[arch]]
name = "sm_86"
family = "Ampere"
nvcc_added = "11.1"
gpus = ["GeForce RTX 3090"]
source = "nv"

[[arch]]
name = "sm_89"
family = "Ada Lovelace"
nvcc_added = "11.8"
gpus = ["GeForce RTX 4090"]
datacenter_gpus = ["NVIDIA L4"]
source = "nv"

[[arch]]
name = "sm_90"
family = "Hopper"
nvcc_added = "11.8"
datacenter_gpus = ["NVIDIA H100"]
source = "nv"

[[cudnn]]
label = "9.0-9.5"
versions = ">=9.0,<9.6"
cuda_majors = [11, 12]
cuda_tested = "11.8; 12.0-12.6"
min_driver = { cuda11 = "450.80.02", cuda12 = "525.60.13" }
min_arch = "5.0"
max_arch = "9.0"
source = "nv"

[[os]]
name = "debian12"
image = "debian:bookworm-slim"
family = "debian"
system_python = "3.11"
glibc = "2.36"
python_images = ["3.12"]
python_image = "python:{python}-slim-bookworm"
source = "nv"

[brand_sets]
datacenter = ["tesla", "nvidia"]

[[cuda_image]]
cuda = "12.4.1"
os = ["debian12"]
cudnn_tag = "cudnn"
cudnn = "9.1.0.70"
fc_branches = [525]
fc_brands = "datacenter"
source = "nv"

[[torchvision]]
version = "0.20.1"
requires_torch = "==2.5.1"
source = "pypi"

[[torchaudio]]
version = "2.5.1"
requires_torch = "==2.5.1"
source = "pypi"

[[torch]]
version = "2.5.1"
released = "2024-11"
pypi_default = "cu124"
python = ["3.9", "3.10", "3.11", "3.12", "3.13"]
platform_tag = "manylinux1_x86_64"
torchvision = "0.20.1"
torchaudio = "2.5.1"
source = "pypi"

[[torch.variants]]
name = "cu118"
cuda = "11.8"
cudnn = "9.1.0.70"
sass = ["3.7", "8.6", "9.0"]
source = "pypi"

[[torch.variants]]
name = "cu124"
cuda = "12.4"
cuda_runtime = "nvidia-cuda-runtime-cu12==12.4.127"
cudnn = "9.1.0.70"
nccl = "2.21.5"
sass = ["8.6", "9.0"]
source = "pypi"

[[torch.variants]]
name = "cpu"
source = "pypi"
"""


def edit(text: str, old: str, new: str) -> str:
    """Replace a snippet that must occur exactly once (so an edit never lands somewhere unmeant)."""
    count = text.count(old)
    assert count == 1, f"{old!r} occurs {count} times"
    return text.replace(old, new)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line where the nth occurrence of `needle` (which may span lines) starts; located
    independently of the loader's own locator."""
    index = -1
    for _ in range(nth):
        index = text.find(needle, index + 1)
        assert index >= 0, f"{needle!r} does not occur {nth} times"
    return text.count("\n", 0, index) + 1


def small(text: str = BASE) -> Matrix:
    """Parse (without cross-entry validation, so rules can be fed deliberately odd facts)."""
    return parse_text(text, "small.toml")


def real() -> Matrix:
    return load_matrix()


def query(m: Matrix, **flags: str | bool | tuple[str, ...]) -> Query:
    """Flags as the CLI takes them: query(m, driver="535", gpu="RTX 4090", forward_compat=True); `arch` and
    `gpu` take one name or a tuple (repeated flags). The platform is linux/amd64 unless given."""
    for single, multiple in (("arch", "archs"), ("gpu", "gpus")):
        if single in flags:
            value = flags.pop(single)
            flags[multiple] = value if isinstance(value, tuple) else (str(value),)
    flags.setdefault("platform", "linux/amd64")
    return parse_query(m, RawQuery(**flags))  # type: ignore[arg-type]


def combo(
    m: Matrix, torch: str, variant: str, python: str = "3.11", os: str = "debian12", platform: str = "linux/amd64"
) -> Combination:
    release = next(t for t in m.torch if str(t.version) == torch)
    found = release.variant(variant)
    assert found is not None, f"torch {torch} has no {variant}"
    base = next(o for o in m.os if o.name == os)
    return Combination(release, found, python, base, Platform(platform))


def fake_os(name: str, glibc: str, python: str = "3.11") -> OSBase:
    from packaging.version import Version

    return OSBase(
        name=name,
        image=f"{name}:latest",
        family="test",
        system_python=python,
        glibc=Version(glibc),
        python_images=(),
        python_image="",
        sources=("nv",),
    )
