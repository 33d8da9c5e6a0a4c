"""Frozen, typed view of matrix.toml. Nothing past the loader sees a raw dict."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from builder.core.archs import Arch
from builder.core.kinds import Platform
from builder.core.versions import Driver, minor_of
from builder.matrix.publish_set import CiDefaults, PublishEntry


class Confidence(StrEnum):
    VERIFIED = "verified"
    SECONDARY = "secondary"
    UNVERIFIED = "unverified"


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where facts come from, and how directly they were read."""

    id: str
    title: str
    url: str
    confidence: Confidence


@dataclass(frozen=True, kw_only=True)
class CudaRelease:
    """A CUDA toolkit release and its minimum Linux driver (Table 3 of the release notes)."""

    version: Version
    min_driver: Driver | None  # None: no sourced value (the reason is in `note`)
    note: str
    sources: tuple[str, ...]

    @property
    def minor(self) -> tuple[int, int]:
        return minor_of(self.version)


@dataclass(frozen=True, kw_only=True)
class CudaMajor:
    """A CUDA major and its minor-version-compatibility driver floor."""

    major: int
    mvc_min_driver: Driver | None  # None: no minor-version compatibility (CUDA 10 and older)
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class DriverBranch:
    """A driver branch, the CUDA version it reports, and its lifecycle where NVIDIA states it: its kind
    (long-term, production, feature) and the month its support ends (`ends`), or the month by which NVIDIA's list
    of supported branches no longer names it (`ended_by`)."""

    branch: int
    reports_cuda: tuple[int, int]
    note: str
    sources: tuple[str, ...]
    kind: str | None = None  # long-term | production | feature; None: not recorded
    ends: tuple[int, int] | None = None  # (year, month): supported through that month
    ended_by: tuple[int, int] | None = None  # (year, month): no longer among the supported branches then


@dataclass(frozen=True, kw_only=True)
class ArchInfo:
    """A GPU architecture: its GPUs by class, the CUDA releases whose nvcc targets it, and the Linux
    drivers that run its GPUs."""

    arch: Arch
    family: str
    gpus: tuple[str, ...]
    datacenter_gpus: tuple[str, ...]
    embedded_gpus: tuple[str, ...]  # Jetson / DGX Spark class; forward compatibility applies
    nvcc_added: Version | None  # None: before the oldest CUDA release in the file
    nvcc_removed: Version | None  # None: still supported
    renamed_to: str | None
    driver_min: tuple[Driver, ...]  # the first Linux driver with these GPUs (see DriverFloors); (): not sourced
    driver_last_branch: int | None  # a legacy architecture: the last driver branch that supports it
    sources: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.arch.name

    def nvcc_supports(self, cuda: Version) -> bool:
        cuda_minor = minor_of(cuda)
        if self.nvcc_added is not None and cuda_minor < minor_of(self.nvcc_added):
            return False
        return self.nvcc_removed is None or cuda_minor < minor_of(self.nvcc_removed)


class Host(StrEnum):
    """Where a GPU runs: in any server or workstation (a PCIe/SXM card), a Grace (Arm SBSA) system only,
    or a Jetson (Tegra, L4T), which PyPI's manylinux wheels do not serve."""

    ANY = "any"
    SBSA = "sbsa"
    TEGRA = "tegra"


@dataclass(frozen=True, kw_only=True)
class GpuProduct:
    """Facts about one GPU product beyond its architecture: a later first driver, the host it sits in,
    other names people give it."""

    name: str
    driver_min: tuple[Driver, ...]  # per branch where it arrived mid-branch; later branches all have it
    host: Host
    aliases: tuple[str, ...]
    note: str
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class CudnnRange:
    """cuDNN releases that share CUDA majors, driver floors and architecture bounds."""

    label: str
    versions: SpecifierSet
    cuda_majors: tuple[int, ...]
    cuda_tested: str
    min_driver: tuple[tuple[int, Driver], ...]  # (CUDA major, floor)
    min_arch: Arch | None  # None: not sourced for this range
    max_arch: Arch | None  # highest arch with code; same-major higher minors run it
    note: str
    sources: tuple[str, ...]

    def driver_floor(self, cuda_major: int) -> Driver | None:
        return dict(self.min_driver).get(cuda_major)


@dataclass(frozen=True, kw_only=True)
class Companion:
    """A torchvision or torchaudio release and what it declares about torch and Python."""

    name: str
    version: Version
    requires_torch: SpecifierSet
    python: SpecifierSet | None
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Build:
    """One variant's wheels for one platform: the GPU code they carry and the version torch reports."""

    platform: Platform
    sass: tuple[Arch, ...] | None  # None: compiled list not sourced
    ptx: tuple[Arch, ...]
    local: str | None  # torch.__version__'s local part (cu130); None: the wheel reports none
    note: str
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TorchVariant:
    """One wheel variant of a torch release (cu124, cpu) and what it bundles and compiles for, per platform."""

    name: str  # cu124, cpu
    cuda: Version | None  # CUDA major.minor; None for cpu
    cuda_runtime: str | None  # the runtime pin as the wheel declares it
    cuda_release: Version | None  # full CUDA release, where the wheel pins one (cuda-toolkit==X)
    cudnn: Version | None
    nccl: Version | None
    builds: tuple[Build, ...]  # linux/amd64 first; a platform without an entry has no wheels of this variant
    note: str
    sources: tuple[str, ...]

    @property
    def is_cpu(self) -> bool:
        return self.cuda is None

    def build(self, platform: Platform) -> Build | None:
        return next((b for b in self.builds if b.platform is platform), None)

    @property
    def sass(self) -> tuple[Arch, ...] | None:
        """linux/amd64's compiled list (every recorded variant has amd64 wheels)."""
        return self.builds[0].sass

    @property
    def ptx(self) -> tuple[Arch, ...]:
        return self.builds[0].ptx


@dataclass(frozen=True, kw_only=True)
class Wheels:
    """A torch release's wheels for one platform: which variant PyPI serves, for which Pythons, which tag."""

    platform: Platform
    pypi_default: str
    python: tuple[str, ...]
    platform_tag: str
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TorchRelease:
    """A torch release: its wheel variants, its wheels per platform (Pythons, glibc floor), companions."""

    version: Version
    released: str
    wheels: tuple[Wheels, ...]  # linux/amd64 first
    torchvision: Version
    torchaudio: Version
    variants: tuple[TorchVariant, ...]
    sources: tuple[str, ...]

    def variant(self, name: str) -> TorchVariant | None:
        return next((v for v in self.variants if v.name == name), None)

    def on(self, platform: Platform) -> Wheels | None:
        return next((w for w in self.wheels if w.platform is platform), None)

    @property
    def pypi_default(self) -> str:
        """linux/amd64's PyPI default (`pip install torch` on x86_64)."""
        return self.wheels[0].pypi_default

    @property
    def python(self) -> tuple[str, ...]:
        return self.wheels[0].python

    @property
    def platform_tag(self) -> str:
        return self.wheels[0].platform_tag


@dataclass(frozen=True, kw_only=True)
class OSBase:
    """An OS base image: its own Python and glibc, and the python images built on it."""

    name: str
    image: str
    family: str
    system_python: str
    glibc: Version
    python_images: tuple[str, ...]  # Python versions with an official python:X-slim-<codename> image
    python_image: str  # pattern with {python}
    sources: tuple[str, ...]
    regular_end: tuple[int, int] | None = None  # (year, month): regular security support through that month
    lts_end: tuple[int, int] | None = None  # (year, month): long-term support (Debian LTS, Ubuntu Pro) through it
    codename: str = ""  # the release's codename (os-release VERSION_CODENAME: bookworm); "": not recorded

    def pythons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.system_python, *self.python_images)))


@dataclass(frozen=True, kw_only=True)
class CudaImage:
    """A nvidia/cuda release and the OS tags it was published for."""

    cuda: Version
    os: tuple[str, ...]
    cudnn_tag: str | None  # cudnn8 | cudnn9 | cudnn | None (no cuDNN images)
    cudnn_os: tuple[str, ...]
    cudnn: Version | None
    fc_branches: tuple[int, ...]
    fc_brands: str | None  # a [brand_sets] name
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class OnnxRuntime:
    """An ONNX Runtime release on PyPI an inference image may install: `onnxruntime` (CPU) or `onnxruntime-gpu`,
    built for one CUDA major and one cuDNN major (the nvidia-* wheels its `cuda` / `cudnn` extras require)."""

    package: str  # onnxruntime | onnxruntime-gpu
    version: Version
    cuda_major: int | None  # None: the CPU package
    cudnn_major: int | None
    python: tuple[str, ...]  # the CPython versions it has wheels for
    platforms: tuple[Platform, ...]  # the Linux platforms it has wheels for
    note: str
    sources: tuple[str, ...]
    code: tuple[WheelCode, ...] = ()  # its CUDA provider's GPU code per platform; a platform left out: not recorded

    @property
    def id(self) -> str:
        return f"{self.package}=={self.version}"

    def code_on(self, platform: Platform) -> WheelCode | None:
        return next((c for c in self.code if c.platform is platform), None)


@dataclass(frozen=True, kw_only=True)
class WheelCode:
    """The GPU code one platform's wheels of a release carry, read from the wheel (builder/upstream/wheel_code.py):
    the SASS and PTX architectures of the library's fat binary, and which wheel was read."""

    platform: Platform
    sass: tuple[Arch, ...]
    ptx: tuple[Arch, ...]
    wheel: str  # the file read
    sha256: str
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class NvidiaWheel:
    """Releases of an NVIDIA library wheel torch's pins install (nvidia-cudnn-cu13, nvidia-nccl-cu13, the
    cuda-toolkit meta-package's components) and the Linux platform tags of their wheels: a glibc floor each, as
    torch's own tag sets one (the rule glibc-os)."""

    package: str
    versions: tuple[Version, ...]  # exactly the releases read
    platform_tags: tuple[str, ...]  # one per platform (manylinux_2_27_x86_64, manylinux_2_27_aarch64)
    via: str  # cuda-toolkit: the component wheel whose tag is the highest of those torch's extras install
    note: str
    sources: tuple[str, ...]

    def tag_for(self, machine: str) -> str | None:
        """The tag of this machine's (x86_64, aarch64) wheels; None: not recorded."""
        return next((t for t in self.platform_tags if t.endswith(f"_{machine}")), None)


@dataclass(frozen=True, kw_only=True)
class OnnxTool:
    """A package of torch.onnx's exporter (onnx, onnxscript), pinned for the inference images."""

    name: str
    version: Version
    python: SpecifierSet  # what its wheels (and Requires-Python) accept
    torch: SpecifierSet  # the torch releases whose exporter needs it
    platforms: tuple[Platform, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class NotebookTool:
    """A package of the notebook image (JupyterLab, ipykernel, ipywidgets), pinned: a combination whose Python its
    Requires-Python refuses has no notebook image."""

    name: str
    version: Version
    python: SpecifierSet  # its Requires-Python
    sources: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """Everything matrix.toml says, validated."""

    path: str
    sources: dict[str, Source] = field(hash=False)
    cuda: tuple[CudaRelease, ...]
    cuda_majors: tuple[CudaMajor, ...]
    driver_branches: tuple[DriverBranch, ...]
    archs: tuple[ArchInfo, ...]
    cudnn: tuple[CudnnRange, ...]
    torchvision: tuple[Companion, ...]
    torchaudio: tuple[Companion, ...]
    torch: tuple[TorchRelease, ...]
    os: tuple[OSBase, ...]
    cuda_images: tuple[CudaImage, ...]
    brand_sets: dict[str, tuple[str, ...]] = field(hash=False)
    gpu_products: tuple[GpuProduct, ...] = ()
    publish: tuple[PublishEntry, ...] = ()
    publish_file: str = ""  # publish.toml (or --publish-set) when the set came from there; "": matrix.toml's own
    publish_note: str = ""  # said by the commands that read the set: matrix.toml's own entries were ignored
    ci: CiDefaults = field(default_factory=CiDefaults)  # publish.toml's [ci] table
    onnxruntime: tuple[OnnxRuntime, ...] = ()
    onnx_tools: tuple[OnnxTool, ...] = ()
    notebook_tools: tuple[NotebookTool, ...] = ()
    nvidia_wheels: tuple[NvidiaWheel, ...] = ()
