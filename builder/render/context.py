"""Small named functions that compute every value the Dockerfile template lays out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from builder import __version__
from builder.core import safety
from builder.core.archs import Arch
from builder.core.errors import RenderError
from builder.core.kinds import Flavor, Installer, Strategy
from builder.core.versions import minor_str
from builder.matrix.model import CudaImage, Matrix
from builder.render.layers import LABEL as LAYERS_LABEL
from builder.render.layers import layer_plan
from builder.render.nvidia import image_tag, require_cuda, select_image
from builder.render.options import RenderOptions
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.report import index_url

VENV = "/opt/venv"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_UID = 1000
# Where each distribution's packages come from, for --apt-mirror rewriting.
APT_ORIGINS = {"debian": "http://deb.debian.org", "ubuntu": "http://archive.ubuntu.com"}
# NVIDIA's CUDA 13 toolkit wheels (verified to compile torch extensions: docs/render.md).
NVCC_EXTRAS = "nvcc,cudart,cccl,crt,nvvm"
# cuobjdump reads the cubins of any older CUDA 13 release; PyPI's oldest CUDA 13 build is 13.2.51
# (https://pypi.org/project/nvidia-cuda-cuobjdump/#history), so devel images take this one.
CUOBJDUMP_PIP = "nvidia-cuda-cuobjdump==13.5.37"
# uv, the installer of --installer uv: a tool pinned like the toolkit wheels, from PyPI
# (https://pypi.org/project/uv/0.13.9/, uploaded 2026-11-17). A stage of its own fetches its wheel and unpacks the
# binary (builder/image/uv_fetch.py, sha256 from the index); the other stages bind-mount it, so no image holds it.
UV_PIP = "uv==0.13.9"
# setuptools builds wheels itself (bdist_wheel) from 70.1 on. The venvs of the OS Pythons (Debian 12:
# pip 23.0.1, setuptools 66.1.1, no `wheel`) and of python:3.11 images carry older ones, with which
# `pip wheel --no-build-isolation` of a torch extension fails: "invalid command 'bdist_wheel'".
EXTENSION_BUILD_PIP = ("setuptools>=70.1",)


@dataclass(frozen=True)
class Bases:
    """The images the stages start from, and the nvidia/cuda release behind them (cuda-base)."""

    os_image: str
    toolchain_image: str | None  # None: the toolchain stage extends the build stage
    cuda_image: CudaImage | None
    system_python: bool


def archs_for(c: Combination, options: RenderOptions) -> tuple[Arch, ...]:
    """--arch as given; else the torch build's own SASS list for the combination's platform (aarch64 wheels carry
    other architectures than x86_64 ones); none for the cpu variant."""
    if c.variant.cuda is None:
        if options.archs:
            raise RenderError("--arch: the cpu variant compiles no GPU code; pick a CUDA variant")
        return ()
    return options.archs or (c.sass or ())


def check_archs(m: Matrix, c: Combination, archs: tuple[Arch, ...]) -> None:
    cuda = c.variant.cuda
    infos = {a.arch: a for a in m.archs}
    for arch in archs:
        info = infos.get(arch)
        if cuda is not None and (info is None or not info.nvcc_supports(cuda)):
            raise RenderError(f"--arch {arch.name}: nvcc of CUDA {minor_str(cuda)} cannot compile for it")


def bases(m: Matrix, c: Combination, strategy: Strategy) -> Bases:
    system = c.python == c.os.system_python
    if strategy is Strategy.WHEELS:
        image = c.os.image if system else c.os.python_image.format(python=c.python)
        return Bases(image, None, None, system)
    if c.variant.cuda is None:
        raise RenderError("--strategy cuda-base needs a CUDA variant; the cpu variant uses --strategy wheels")
    if not system:
        raise RenderError(f"--strategy cuda-base uses {c.os.name}'s own Python {c.os.system_python}, not {c.python}")
    cuda_image = select_image(m, c.variant.cuda, c.os.name)
    devel_cudnn = cuda_image.cudnn_tag is not None and c.os.name in cuda_image.cudnn_os and _same_cudnn(c, cuda_image)
    return Bases(
        image_tag(cuda_image, "base", c.os.name),
        image_tag(cuda_image, "devel", c.os.name, cudnn=devel_cudnn),
        cuda_image,
        True,
    )


def _same_cudnn(c: Combination, image: CudaImage) -> bool:
    # cuDNN headers in devel must match the ABI major torch loads (8 and 9 are not interchangeable).
    return c.variant.cudnn is not None and image.cudnn is not None and image.cudnn.major == c.variant.cudnn.major


def nvcc_pip(c: Combination, strategy: Strategy) -> tuple[str, ...] | None:
    """The toolkit wheels for devel (wheels strategy): CUDA 13 only, since CUDA 12's carry no nvcc."""
    cuda = c.variant.cuda
    if cuda is None or strategy is Strategy.CUDA_BASE:
        return None
    if cuda.major < 13:
        raise RenderError(
            f"devel with --strategy wheels needs nvcc from PyPI, which NVIDIA publishes for CUDA 13 only "
            f"(CUDA {minor_str(cuda)} wheels carry no nvcc); use --strategy cuda-base or --target runtime"
        )
    pin = f"=={c.variant.cuda_release}" if c.variant.cuda_release else f"=={minor_str(cuda)}.*"
    return (f"cuda-toolkit[{NVCC_EXTRAS}]{pin}", CUOBJDUMP_PIP)


def toolchain_pip(nvcc: tuple[str, ...] | None) -> list[str]:
    """What the toolchain stage pip-installs: extension build tools, then the toolkit wheels (if any)."""
    return [*EXTENSION_BUILD_PIP, *(nvcc or ())]


def cuda_home(c: Combination, strategy: Strategy) -> str | None:
    cuda = c.variant.cuda
    if cuda is None:
        return None
    if strategy is Strategy.CUDA_BASE:
        return "/usr/local/cuda"
    return f"{VENV}/lib/python{c.python}/site-packages/nvidia/cu{cuda.major}"


def os_packages(c: Combination, system_python: bool) -> list[str]:
    packages = ["ca-certificates", "tini"]
    if system_python:
        packages.append("python3")
    return sorted(packages + compiler_packages(c, system_python))


# torch.compile compiles at run time: Inductor's CPU kernels and their Python bindings with a C++ compiler and
# Python.h, Triton's GPU launcher with a C compiler and Python.h. Every image with torch >= 2.0 carries them
# (the smoke suite's compile checks run there); the size it costs is in docs/benchmarks.md.
COMPILE_SINCE = Version("2.0")


def compiler_packages(c: Combination, system_python: bool) -> list[str]:
    if c.torch.version < COMPILE_SINCE:
        return []
    return ["g++"] + (["python3-dev"] if system_python else [])  # python:X-slim images carry Python.h


def build_packages(system_python: bool, installer: Installer) -> list[str]:
    """What the build stages (FROM the base image, beside the os stage) install: the OS's Python; pip's venv
    module for pip, the CA certificates uv's download needs for uv (`uv venv` needs no venv module)."""
    if not system_python:
        return []  # python:X-slim images carry Python, its venv module and ca-certificates
    return ["python3", "python3-venv"] if installer is Installer.PIP else ["ca-certificates", "python3"]


def toolchain_packages(system_python: bool) -> list[str]:
    packages = ["g++", "make", "ninja-build"]
    if system_python:
        packages.append("python3-dev")
    return sorted(packages)


def constraints(c: Combination) -> str:
    return f"torch=={c.torch.version}\ntorchvision=={c.torch.torchvision}\ntorchaudio=={c.torch.torchaudio}\n"


def unpinned(c: Combination, field: str, requirement: str) -> str:
    """An extra requirement that is safe in a RUN line and does not contradict the pins (torch's and the NVIDIA
    wheels', builder/render/pins.py): pip would refuse `torch==1.0.0` against constraints.txt only in the build,
    minutes later."""
    safety.check(field, requirement, safety.PIP_REQUIREMENT, "numpy<2")
    from packaging.requirements import InvalidRequirement, Requirement

    from builder.render.pins import check_unpinned

    try:
        parsed = Requirement(requirement)
    except InvalidRequirement as exc:
        raise RenderError(f"{field}: {requirement!r} is not a pip requirement ({str(exc).splitlines()[0]})") from None
    check_unpinned(c, field, requirement, parsed.name, str(parsed.specifier))
    return requirement


def torch_index(c: Combination, options: RenderOptions) -> str | None:
    if options.torch_index_url:
        # The URL is written into the Dockerfile (pip --index-url): credentials have no place there.
        return safety.check_url_without_credentials(
            "--torch-index-url",
            options.torch_index_url,
            where="the Dockerfile",
            example="https://download.pytorch.org/whl/cu124",
        )
    return index_url(c)


def user_of(options: RenderOptions) -> dict[str, Any] | None:
    if options.user is None:
        return None
    name = safety.check("--user", options.user, safety.USER_NAME, "torch")
    if name == "root":
        raise RenderError("--user root: images run as root already; --user names a non-root user to create")
    return {"name": name, "uid": USER_UID}


def nvidia_env(f: Facts, c: Combination, bases_: Bases) -> list[tuple[str, str]]:
    if c.variant.cuda is None:
        return []
    return [
        ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
        ("NVIDIA_REQUIRE_CUDA", require_cuda(f, c.variant.cuda, bases_.cuda_image)),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
    ]


def target_path(flavor: Flavor, home: str | None) -> str:
    cuda_bin = f"{home}/bin:" if home and flavor is Flavor.DEVEL else ""
    return f"{VENV}/bin:{cuda_bin}{SYSTEM_PATH}"


NVIDIA_LICENSE = "LicenseRef-NVIDIA-Proprietary"


def licenses(c: Combination) -> str:
    """SPDX expression of what the image carries: PyTorch (BSD-3-Clause) and, in a CUDA image, NVIDIA's
    libraries (the nvidia-* wheels and CUDA images ship under NVIDIA's own licence, not an open one)."""
    return "BSD-3-Clause" if c.variant.cuda is None else f"BSD-3-Clause AND {NVIDIA_LICENSE}"


def labels(
    c: Combination,
    flavor: Flavor,
    strategy: Strategy,
    archs: tuple[Arch, ...],
    min_driver: str | None,
    options: RenderOptions,
    stage_pip: tuple[str, ...] = (),
) -> list[tuple[str, str]]:
    v = c.variant
    ours = {
        "org.opencontainers.image.title": f"torchyard {c.local_version} {flavor.value}",
        "org.opencontainers.image.description": f"PyTorch {c.local_version} on {c.os.name}, Python {c.python}",
        "org.opencontainers.image.version": c.local_version,
        "org.opencontainers.image.vendor": "torchyard",
        "org.opencontainers.image.licenses": licenses(c),
        "io.torchyard.version": __version__,
        "io.torchyard.combination": c.id,
        "io.torchyard.torch": c.local_version,
        "io.torchyard.torchvision": str(c.torch.torchvision),
        "io.torchyard.torchaudio": str(c.torch.torchaudio),
        "io.torchyard.cuda": minor_str(v.cuda) if v.cuda else "none",
        "io.torchyard.cudnn": str(v.cudnn) if v.cudnn else "none",
        "io.torchyard.nccl": str(v.nccl) if v.nccl else "none",
        "io.torchyard.python": c.python,
        "io.torchyard.os": c.os.name,
        "io.torchyard.arch-list": " ".join(a.name for a in archs) or "none",
        # the extensions' names: their code is arch-list's only (host/find.py judges an image by it)
        "io.torchyard.extensions": " ".join(sorted(e.name for e in options.extensions)) or "none",
        "io.torchyard.min-driver": min_driver or "none",
        "io.torchyard.strategy": strategy.value,
        "io.torchyard.flavor": flavor.value,
        LAYERS_LABEL: layer_plan(c).label(),
    }
    if flavor in (Flavor.INFERENCE, Flavor.NOTEBOOK):  # what the stage adds on top of the venv, as pinned
        ours[f"io.torchyard.{flavor.value}"] = " ".join(stage_pip)
    ours |= dict(options.family_labels)  # checked when matrix.toml was read
    for key, value in options.labels:
        safety.check("--label", key, safety.LABEL_KEY, "team=vision")
        safety.check("--label", value, safety.LABEL_VALUE, "team=vision")
        if key.startswith("io.torchyard."):
            raise RenderError(f"--label {key}: the io.torchyard. namespace is torchyard's own")
        ours[key] = value
    return sorted(ours.items())
