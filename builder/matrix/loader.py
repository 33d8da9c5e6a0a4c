"""Parse matrix.toml once into the frozen model; every problem is one located line (MatrixError)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from builder.errors import MatrixError
from builder.files import read_text
from builder.kinds import Platform, did_you_mean
from builder.matrix import reader as r
from builder.matrix.locate import KeyPath
from builder.matrix.model import (
    ArchInfo,
    Build,
    Companion,
    Confidence,
    CudaImage,
    CudaMajor,
    CudaRelease,
    CudnnRange,
    DriverBranch,
    GpuProduct,
    Host,
    Matrix,
    OSBase,
    Source,
    TorchRelease,
    TorchVariant,
    Wheels,
)
from builder.matrix.publish_set import parse_publish
from builder.matrix.reader import Context, Entry
from builder.matrix.toml_text import TomlSyntaxError, parse_toml
from builder.resources import default_matrix_path
from builder.versions import Driver

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)
SCHEMA = 1
_TOP = (
    "schema",
    "sources",
    "cuda_major",
    "driver_branch",
    "cuda",
    "arch",
    "cudnn",
    "torchvision",
    "torchaudio",
    "torch",
    "os",
    "brand_sets",
    "cuda_image",
    "gpu_product",
    "publish",
)
_TOML_POS = re.compile(r"^(.*?)\s*\(at line (\d+), column (\d+)\)$", re.ASCII)


def load_matrix(path: Path | str | None = None) -> Matrix:
    """Load and validate; the default file is cached (commands call this more than once)."""
    if path is None:
        return _load_default()
    return _load(Path(path))


@functools.cache
def _load_default() -> Matrix:
    return _load(default_matrix_path())


def _load(path: Path) -> Matrix:
    from builder.matrix.validate import validate

    text = read_text(path, "", error=MatrixError)
    ctx = Context(str(path), text)
    matrix = _parse(ctx)
    validate(matrix, ctx)
    return matrix


def parse_text(text: str, file: str) -> Matrix:
    """Parse and convert one document, without the cross-entry checks of validate()."""
    return _parse(Context(file, text))


def _parse(ctx: Context) -> Matrix:
    try:
        doc = parse_toml(ctx.text)
    except TomlSyntaxError as exc:
        raise MatrixError(_toml_error(ctx.file, str(exc))) from None
    top = Entry(ctx, (), "matrix", doc, _TOP)
    schema = top.get("schema", r.integer)
    if schema != SCHEMA:
        top.fail_key("schema", f"schema {schema} is not supported (this torchyard reads schema {SCHEMA})")
    return _build(ctx, doc)


def _toml_error(file: str, message: str) -> str:
    match = _TOML_POS.match(message)
    if match:
        return f"{file}:{match[2]}:{match[3]}: TOML syntax error: {match[1]}"
    return f"{file}: TOML syntax error: {message}"


def _build(ctx: Context, doc: dict[str, Any]) -> Matrix:
    def array(key: str, make: Callable[[Entry], T], ident: Callable[[T], str]) -> tuple[T, ...]:
        keys, name_key = _KEYS[key]
        return _array(ctx, doc, key, keys, name_key, make, ident)

    return Matrix(
        path=ctx.file,
        sources={s.id: s for s in _sources(ctx, doc.get("sources", {}))},
        cuda_majors=array("cuda_major", _cuda_major, lambda e: str(e.major)),
        driver_branches=array("driver_branch", _driver_branch, lambda e: str(e.branch)),
        cuda=array("cuda", _cuda, lambda e: str(e.version)),
        archs=array("arch", _arch, lambda e: e.name),
        cudnn=array("cudnn", _cudnn, lambda e: e.label),
        torchvision=array("torchvision", _companion("torchvision"), lambda e: str(e.version)),
        torchaudio=array("torchaudio", _companion("torchaudio"), lambda e: str(e.version)),
        torch=array("torch", _torch, lambda e: str(e.version)),
        os=array("os", _os, lambda e: e.name),
        cuda_images=array("cuda_image", _cuda_image, lambda e: str(e.cuda)),
        brand_sets=_brand_sets(ctx, doc.get("brand_sets", {})),
        gpu_products=array("gpu_product", _gpu_product, lambda e: e.name),
        publish=parse_publish(ctx, doc.get("publish", [])),
    )


def _array(
    ctx: Context,
    doc: dict[str, Any],
    key: str,
    keys: tuple[str, ...],
    name_key: str,
    make: Callable[[Entry], T],
    ident: Callable[[T], str],
) -> tuple[T, ...]:
    """An array of tables, each converted by `make`; a repeated identity is a duplicate entry."""
    items: list[T] = []
    seen: dict[str, int] = {}
    for index, raw in _entries(ctx, (key,), key, doc.get(key, [])):
        entry = _open(ctx, (key, index), f"{key}[{index}]", raw, keys, name_key)
        item = make(entry)
        name = ident(item)
        if name in seen:
            first = ctx.locator.line_of((key, seen[name]))
            where = f"at line {first}" if first else f"{key}[{seen[name]}]"
            ctx.fail((key, index), f"{key}[{name}]", f"duplicate entry (the first is {where})")
        seen[name] = index
        items.append(item)
    return tuple(items)


def _entries(ctx: Context, path: KeyPath, label: str, raw: Any) -> Iterator[tuple[int, Any]]:
    if not isinstance(raw, list):
        ctx.fail(path, label, "expected an array of tables ([[...]])")
    yield from enumerate(raw)


_SOURCE_KEYS = ("source",)


def _open(ctx: Context, path: KeyPath, label: str, raw: Any, keys: tuple[str, ...], name_key: str) -> Entry:
    """Open a table labelled by its natural key (torch[2.5.1]) when it has one."""
    if isinstance(raw, dict) and isinstance(raw.get(name_key), str | int):
        label = f"{label.rsplit('[', 1)[0]}[{raw[name_key]}]"
    return Entry(ctx, path, label, raw, keys + _SOURCE_KEYS)


def _sources(ctx: Context, raw: Any) -> Iterator[Source]:
    if not isinstance(raw, dict):
        ctx.fail(("sources",), "sources", "expected a table of [sources.<id>] tables")
    for ident, body in raw.items():
        e = Entry(ctx, ("sources", ident), f"sources.{ident}", body, ("title", "url", "confidence"))
        confidence = e.get("confidence", _enum(Confidence))
        url = e.get("url", r.text)
        if not url.startswith("https://"):
            e.fail_key("url", f"expected an https:// URL, found {url!r}")
        yield Source(id=ident, title=e.get("title", r.text), url=url, confidence=confidence)


def _enum(kind: type[E]) -> Callable[[Any], E]:
    def convert(value: Any) -> E:
        names = [c.value for c in kind]
        if value not in names:
            raise ValueError(f"{value!r} is not one of {', '.join(names)}{did_you_mean(str(value), names)}")
        return kind(value)

    return convert


def _cuda_major(e: Entry) -> CudaMajor:
    return CudaMajor(
        major=e.get("major", r.integer),
        mvc_min_driver=e.get("mvc_min_driver", r.driver, None),
        sources=e.get("source", r.sources),
    )


def _driver_branch(e: Entry) -> DriverBranch:
    reports = e.get("reports_cuda", r.minor_version)
    return DriverBranch(
        branch=e.get("branch", r.integer),
        reports_cuda=(reports.major, reports.minor),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def _cuda(e: Entry) -> CudaRelease:
    version = e.get("version", r.version)
    if len(version.release) != 3:
        e.fail_key("version", f"expected a full toolkit version like 12.4.1, found {str(version)!r}")
    return CudaRelease(
        version=version,
        min_driver=e.get("min_driver", r.driver, None),
        note=e.get("note", r.text, ""),
        sources=e.get("source", r.sources),
    )


def _arch(e: Entry) -> ArchInfo:
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


def _gpu_product(e: Entry) -> GpuProduct:
    return GpuProduct(
        name=e.get("name", r.text),
        driver_min=e.get("driver_min", r.driver_floors, ()),
        host=e.get("host", _enum(Host), Host.ANY),
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


def _cudnn(e: Entry) -> CudnnRange:
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


def _companion(name: str) -> Callable[[Entry], Companion]:
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


def _torch(e: Entry) -> TorchRelease:
    variants = tuple(
        _variant(_open(e.ctx, (*e.path, "variants", i), f"{e.label}.variants[{i}]", raw, _VARIANT_KEYS, "name"))
        for i, raw in _entries(e.ctx, (*e.path, "variants"), f"{e.label}.variants", e.raw.get("variants", []))
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
        python=e.get("python", _python_list),
        platform_tag=e.get("platform_tag", r.text),
        sources=sources,
    )


def _python_list(value: Any) -> tuple[str, ...]:
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


def _os(e: Entry) -> OSBase:
    return OSBase(
        name=e.get("name", r.text),
        image=e.get("image", r.text),
        family=e.get("family", r.text),
        system_python=str(e.get("system_python", r.minor_version)),
        glibc=e.get("glibc", r.version),
        python_images=e.get("python_images", _python_list, ()),
        python_image=e.get("python_image", r.text, ""),
        sources=e.get("source", r.sources),
    )


def _cuda_image(e: Entry) -> CudaImage:
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


def _brand_sets(ctx: Context, raw: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict):
        ctx.fail(("brand_sets",), "brand_sets", "expected a table of name = [brands]")
    sets: dict[str, tuple[str, ...]] = {}
    for name, brands in raw.items():
        try:
            sets[name] = r.text_list(brands)
        except ValueError as exc:
            ctx.fail(("brand_sets", name), f"brand_sets.{name}", str(exc))
    return sets


# Keys each array-of-tables entry may carry (besides `source`), and the key that names it.
_KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "cuda_major": (("major", "mvc_min_driver"), "major"),
    "driver_branch": (("branch", "reports_cuda", "note"), "branch"),
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
        ("name", "image", "family", "system_python", "glibc", "python_images", "python_image"),
        "name",
    ),
    "cuda_image": (("cuda", "os", "cudnn_tag", "cudnn_os", "cudnn", "fc_branches", "fc_brands"), "cuda"),
    "gpu_product": (("name", "driver_min", "host", "aliases", "note"), "name"),
}
