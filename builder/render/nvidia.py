"""nvidia/cuda image tags and the NVIDIA container runtime contract (NVIDIA_REQUIRE_CUDA)."""

from __future__ import annotations

from packaging.version import Version

from builder.core.errors import RenderError
from builder.core.versions import Driver, minor_of, minor_str
from builder.matrix.model import CudaImage, Matrix
from builder.resolve.facts import Facts

REPOSITORY = "nvidia/cuda"


def image_tag(image: CudaImage, flavor: str, os_name: str, *, cudnn: bool = False) -> str:
    """`<x.y.z>-[cudnnN-]<base|runtime|devel>-<os>`; the cuDNN part only where the image has one."""
    if cudnn:
        if image.cudnn_tag is None or os_name not in image.cudnn_os:
            raise RenderError(f"{REPOSITORY}:{image.cuda} has no cuDNN {flavor} image for {os_name}")
        return f"{REPOSITORY}:{image.cuda}-{image.cudnn_tag}-{flavor}-{os_name}"
    return f"{REPOSITORY}:{image.cuda}-{flavor}-{os_name}"


def select_image(m: Matrix, cuda: Version, os_name: str) -> CudaImage:
    """The newest nvidia/cuda release of this CUDA minor published for the OS, or a refusal naming
    the tags that do exist."""
    same_minor = [i for i in m.cuda_images if minor_of(i.cuda) == minor_of(cuda)]
    for_os = [i for i in same_minor if os_name in i.os]
    if for_os:
        return max(for_os, key=lambda i: i.cuda)
    if same_minor:
        where = "; ".join(f"{i.cuda}: {', '.join(i.os)}" for i in same_minor)
        raise RenderError(
            f"no {REPOSITORY} image for CUDA {minor_str(cuda)} on {os_name} "
            f"(published: {where}); pick one of those with --os, or use --strategy wheels"
        )
    known = sorted({minor_str(i.cuda) for i in m.cuda_images}, key=lambda s: tuple(map(int, s.split("."))))
    raise RenderError(
        f"no {REPOSITORY} image recorded for CUDA {minor_str(cuda)} (recorded: {', '.join(known)}); "
        "use --strategy wheels"
    )


def _semver(driver: Driver) -> str:
    # The Go requirement checker parses semver: no leading zeros (580.65.06 -> 580.65.6).
    return ".".join(str(p) for p in driver.parts)


def require_cuda(f: Facts, cuda: Version, image: CudaImage | None) -> str:
    """NVIDIA_REQUIRE_CUDA exactly as strict as the real requirement.

    The wheel-bundled CUDA runtime needs a driver at the minor-version-compatibility floor of its
    major; a driver at that floor reports CUDA <major>.0, so `cuda>=M.0` says it, plus an ANDed
    `driver>=` where the floor is above the M.0 GA driver (CUDA 11: 450.80.02). NVIDIA's own images
    require cuda>=X.Y instead, refusing drivers that minor-version compatibility runs. A cuda-base
    image also carries cuda-compat, so its forward-compatibility branch exceptions are kept.
    """
    mvc = f.mvc_floor(cuda.major)
    if mvc is None:
        requirement = f"cuda>={minor_str(cuda)}"
    else:
        requirement = f"cuda>={cuda.major}.0"
        major_ga = f.full_driver(Version(f"{cuda.major}.0"))
        if major_ga is None or not major_ga.at_least(mvc):
            requirement += f",driver>={_semver(mvc)}"
    if image is None or not image.fc_branches or image.fc_brands is None:
        return requirement
    brands = f.matrix.brand_sets[image.fc_brands]
    exceptions = [f"brand={b},driver>={n},driver<{n + 1}" for n in image.fc_branches for b in brands]
    return " ".join([requirement, *exceptions])
