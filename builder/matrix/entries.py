"""Building the model from matrix.toml's entries: one small function per kind of table, each reading its keys
through reader.Entry (which reports file:line for a bad value)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any, TypeVar

from builder.core.kinds import Platform, did_you_mean
from builder.core.versions import Driver
from builder.matrix import reader as r
from builder.matrix.locate import KeyPath
from builder.matrix.model import (
    ArchInfo,
    Build,
    Companion,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnRange,
    DriverBranch,
    GpuProduct,
    Host,
    OSBase,
    TorchRelease,
    TorchVariant,
    Wheels,
)
from builder.matrix.reader import Context, Entry

E = TypeVar("E", bound=StrEnum)


def entries_of(ctx: Context, path: KeyPath, label: str, raw: Any) -> Iterator[tuple[int, Any]]:
    if not isinstance(raw, list):
        ctx.fail(path, label, "expected an array of tables ([[...]])")
    yield from enumerate(raw)


_SOURCE_KEYS = ("source",)


def open_entry(ctx: Context, path: KeyPath, label: str, raw: Any, keys: tuple[str, ...], name_key: str) -> Entry:
    """Open a table labelled by its natural key (torch[2.5.1]) when it has one."""
    if isinstance(raw, dict) and isinstance(raw.get(name_key), str | int):
        label = f"{label.rsplit('[', 1)[0]}[{raw[name_key]}]"
    return Entry(ctx, path, label, raw, keys + _SOURCE_KEYS)


def enum_of(kind: type[E]) -> Callable[[Any], E]:
    def convert(value: Any) -> E:
        names = [c.value for c in kind]
        if value not in names:
            raise ValueError(f"{value!r} is not one of {', '.join(names)}{did_you_mean(str(value), names)}")
        return kind(value)

    return convert


def cuda_major(e: Entry) -> CudaMajor:
    return CudaMajor(
        major=e.get("major", r.integer),
        mvc_min_driver=e.get("mvc_min_driver", r.driver, None),
        sources=e.get("source", r.sources),
    )


def driver_branch(e: Entry) -> DriverBranch:
    reports = e.get("reports_cuda", r.minor_version)
    return DriverBranch(
        branch=e.get("branch", r.integer),
        reports_cuda=(reports.major, reports.minor),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
        kind=e.get("kind", enum_of(BranchKind), None),
        ends=e.get("ends", r.year_month, None),
        ended_by=e.get("ended_by", r.year_month, None),
    )


class BranchKind(StrEnum):
    """NVIDIA's driver branch designations (data center drivers' lifecycle)."""

    LONG_TERM = "long-term"
    PRODUCTION = "production"
    FEATURE = "feature"


def cuda_release(e: Entry) -> CudaRelease:
    version = e.get("version", r.version)
    if len(version.release) != 3:
        e.fail_key("version", f"expected a full toolkit version like 12.4.1, found {str(version)!r}")
    return CudaRelease(
        version=version,
        min_driver=e.get("min_driver", r.driver, None),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def arch_info(e: Entry) -> ArchInfo:
    return ArchInfo(
        arch=e.get("name", r.arch),
        family=e.get("family", r.text),
        gpus=e.get("gpus", r.text_list, ()),
        datacenter_gpus=e.get("datacenter_gpus", r.text_list, ()),
        embedded_gpus=e.get("embedded_gpus", r.text_list, ()),
        nvcc_added=e.get("nvcc_added", r.minor_version, None),
        nvcc_removed=e.get("nvcc_removed", r.minor_version, None),
        renamed_to=e.get("renamed_to", r.text, None),
        driver_min=e.get("driver_min", r.driver_floors, ()),
        driver_last_branch=e.get("driver_last_branch", r.integer, None),
        sources=e.get("source", r.sources),
    )


def gpu_product(e: Entry) -> GpuProduct:
    return GpuProduct(
        name=e.get("name", r.text),
        driver_min=e.get("driver_min", r.driver_floors, ()),
        host=e.get("host", enum_of(Host), Host.ANY),
        aliases=e.get("aliases", r.text_list, ()),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def _driver_table(value: Any) -> tuple[tuple[int, Driver], ...]:
    if not isinstance(value, dict):
        raise ValueError(f'expected an inline table like {{ cuda12 = "525.60.13" }}, found {value!r}')
    floors = []
    for key, floor in value.items():
        match = re.fullmatch(r"cuda(\d+)", key)
        if not match:
            raise ValueError(f"key {key!r} should name a CUDA major like cuda12")
        floors.append((int(match[1]), r.driver(floor)))
    return tuple(floors)


def cudnn(e: Entry) -> CudnnRange:
    return CudnnRange(
        label=e.get("label", r.text),
        versions=e.get("versions", r.spec),
        cuda_majors=e.get("cuda_majors", r.int_list),
        cuda_tested=e.get("cuda_tested", r.text),
        min_driver=e.get("min_driver", _driver_table, ()),
        min_arch=e.get("min_arch", r.arch, None),
        max_arch=e.get("max_arch", r.arch, None),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def companion(name: str) -> Callable[[Entry], Companion]:
    def make(e: Entry) -> Companion:
        return Companion(
            name=name,
            version=e.get("version", r.version),
            requires_torch=e.get("requires_torch", r.spec),
            python=e.get("python", r.spec, None),
            sources=e.get("source", r.sources),
        )

    return make


_VARIANT_KEYS = ("name", "cuda", "cuda_runtime", "cudnn", "nccl", "sass", "ptx", "note", "arm64")
_BUILD_KEYS = ("sass", "ptx", "local", "note")
_WHEELS_KEYS = ("pypi_default", "python", "platform_tag")
_TORCH_KEYS = (
    "version",
    "released",
    "pypi_default",
    "python",
    "platform_tag",
    "torchvision",
    "torchaudio",
    "variants",
    "arm64",
)


def torch_release(e: Entry) -> TorchRelease:
    variants = tuple(
        _variant(open_entry(e.ctx, (*e.path, "variants", i), f"{e.label}.variants[{i}]", raw, _VARIANT_KEYS, "name"))
        for i, raw in entries_of(e.ctx, (*e.path, "variants"), f"{e.label}.variants", e.raw.get("variants", []))
    )
    wheels = [_wheels(e, Platform.AMD64, e.get("source", r.sources))]
    arm64 = _sub_table(e, Platform.ARM64, _WHEELS_KEYS)
    if arm64 is not None:
        wheels.append(_wheels(arm64, Platform.ARM64, arm64.get("source", r.sources)))
    return TorchRelease(
        version=e.get("version", r.version),
        released=e.get("released", r.text),
        wheels=tuple(wheels),
        torchvision=e.get("torchvision", r.version),
        torchaudio=e.get("torchaudio", r.version),
        variants=variants,
        sources=e.get("source", r.sources),
    )


def _sub_table(e: Entry, platform: Platform, keys: tuple[str, ...]) -> Entry | None:
    """The [<parent>.arm64] table of a platform other than linux/amd64, when present."""
    if platform.arch not in e.raw:
        return None
    path = (*e.path, platform.arch)
    return Entry(e.ctx, path, f"{e.label}.{platform.arch}", e.raw[platform.arch], (*keys, "source"))


def _wheels(e: Entry, platform: Platform, sources: tuple[str, ...]) -> Wheels:
    return Wheels(
        platform=platform,
        pypi_default=e.get("pypi_default", r.text),
        python=e.get("python", python_list),
        platform_tag=e.get("platform_tag", r.text),
        sources=sources,
    )


def python_list(value: Any) -> tuple[str, ...]:
    return tuple(str(r.minor_version(item)) for item in r.text_list(value))


_VARIANT_NAME = re.compile(r"^(cpu|cu\d{3})$", re.ASCII)
_TOOLKIT_PIN = re.compile(r"^cuda-toolkit==(\d+\.\d+\.\d+)$", re.ASCII)
_LOCAL = re.compile(r"^(none|[a-z0-9]+)$", re.ASCII)


def _variant(e: Entry) -> TorchVariant:
    name = e.get("name", r.text)
    if not _VARIANT_NAME.match(name):
        e.fail_key("name", f"{name!r} is not a wheel variant like cu124 or cpu")
    runtime = e.get("cuda_runtime", r.text, None)
    toolkit = _TOOLKIT_PIN.match(runtime or "")
    sources = e.get("source", r.sources)
    builds = [_variant_build(e, Platform.AMD64, name, sources)]
    arm64 = _sub_table(e, Platform.ARM64, _BUILD_KEYS)
    if arm64 is not None:
        builds.append(_variant_build(arm64, Platform.ARM64, name, arm64.get("source", r.sources)))
    return TorchVariant(
        name=name,
        cuda=e.get("cuda", r.minor_version, None),
        cuda_runtime=runtime,
        cuda_release=r.version(toolkit[1]) if toolkit else None,
        cudnn=e.get("cudnn", r.version, None),
        nccl=e.get("nccl", r.version, None),
        builds=tuple(builds),
        note=e.get("note", r.text, ""),
        sources=sources,
    )


def _variant_build(e: Entry, platform: Platform, variant: str, sources: tuple[str, ...]) -> Build:
    local = e.get("local", r.text, variant)
    if not _LOCAL.match(local):
        e.fail_key("local", f"{local!r} is not a local version part like cu130 (or none)")
    return Build(
        platform=platform,
        sass=e.get("sass", r.arch_list, None),
        ptx=e.get("ptx", r.arch_list, ()),
        local=None if local == "none" else local,
        note=e.get("note", r.text, "") if platform is not Platform.AMD64 else "",
        sources=sources,
    )


def os_base(e: Entry) -> OSBase:
    return OSBase(
        name=e.get("name", r.text),
        image=e.get("image", r.text),
        family=e.get("family", r.text),
        system_python=str(e.get("system_python", r.minor_version)),
        glibc=e.get("glibc", r.version),
        python_images=e.get("python_images", python_list, ()),
        python_image=e.get("python_image", r.text, ""),
        sources=e.get("source", r.sources),
        regular_end=e.get("regular_end", r.year_month, None),
        lts_end=e.get("lts_end", r.year_month, None),
        codename=e.get("codename", r.text, ""),
    )


def cuda_image(e: Entry) -> CudaImage:
    oses = e.get("os", r.text_list)
    return CudaImage(
        cuda=e.get("cuda", r.version),
        os=oses,
        cudnn_tag=e.get("cudnn_tag", r.text, None),
        cudnn_os=e.get("cudnn_os", r.text_list, oses),
        cudnn=e.get("cudnn", r.version, None),
        fc_branches=e.get("fc_branches", r.int_list, ()),
        fc_brands=e.get("fc_brands", r.text, None),
        sources=e.get("source", r.sources),
    )


# Keys each array-of-tables entry may carry (besides `source`), and the key that names it.
KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "cuda_major": (("major", "mvc_min_driver"), "major"),
    "driver_branch": (("branch", "reports_cuda", "note", "kind", "ends", "ended_by"), "branch"),
    "cuda": (("version", "min_driver", "note"), "version"),
    "arch": (
        (
            "name",
            "family",
            "gpus",
            "datacenter_gpus",
            "embedded_gpus",
            "nvcc_added",
            "nvcc_removed",
            "renamed_to",
            "driver_min",
            "driver_last_branch",
        ),
        "name",
    ),
    "cudnn": (
        ("label", "versions", "cuda_majors", "cuda_tested", "min_driver", "min_arch", "max_arch", "note"),
        "label",
    ),
    "torchvision": (("version", "requires_torch", "python"), "version"),
    "torchaudio": (("version", "requires_torch", "python"), "version"),
    "torch": (_TORCH_KEYS, "version"),
    "os": (
        (
            "name",
            "image",
            "family",
            "system_python",
            "glibc",
            "python_images",
            "python_image",
            "regular_end",
            "lts_end",
            "codename",
        ),
        "name",
    ),
    "cuda_image": (("cuda", "os", "cudnn_tag", "cudnn_os", "cudnn", "fc_branches", "fc_brands"), "cuda"),
    "gpu_product": (("name", "driver_min", "host", "aliases", "note"), "name"),
    "onnxruntime": (
        ("package", "version", "cuda_major", "cudnn_major", "python", "platforms", "note", "amd64", "arm64"),
        "version",
    ),
    "nvidia_wheel": (("package", "versions", "platform_tags", "via", "note"), "package"),
    "onnx_tool": (("name", "version", "python", "torch", "platforms"), "name"),
    "notebook_tool": (("name", "version", "python"), "name"),
}
