"""Parse matrix.toml once into the frozen model; every problem is one located line (MatrixError)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from builder.core.errors import MatrixError
from builder.core.files import read_text
from builder.core.resources import default_matrix_path
from builder.matrix import entries as en
from builder.matrix import onnx_entries as oe
from builder.matrix import reader as r
from builder.matrix import wheel_facts as wf
from builder.matrix.model import (
    Confidence,
    Matrix,
    Source,
)
from builder.matrix.publish_file import publish_file_of, with_publish_file
from builder.matrix.publish_set import parse_publish
from builder.matrix.reader import Context, Entry
from builder.matrix.toml_text import TomlSyntaxError, parse_toml

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
    "onnxruntime",
    "onnx_tool",
    "notebook_tool",
    "nvidia_wheel",
)
_TOML_POS = re.compile(r"^(.*?)\s*\(at line (\d+), column (\d+)\)$", re.ASCII)


def load_matrix(
    path: Path | str | None = None, publish_set: Path | str | None = None, *, facts_only: bool = False
) -> Matrix:
    """Load and validate; the default file is cached (commands call this more than once). The publish set comes
    from `publish_set`, else publish.toml beside the matrix when there is one, else the matrix's own entries;
    `facts_only`: not read at all (the commands that plan no publish set: a broken publish.toml is not theirs)."""
    m = _load_default() if path is None else _load(Path(path))
    if facts_only:
        return m
    found = publish_file_of(m.path, None if publish_set is None else str(publish_set))
    if found is None:
        return m
    ctx = Context(str(found), read_text(found, "", error=MatrixError))
    return with_publish_file(m, ctx, _document(ctx))


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


def _document(ctx: Context) -> dict[str, Any]:
    try:
        return parse_toml(ctx.text)
    except TomlSyntaxError as exc:
        raise MatrixError(_toml_error(ctx.file, str(exc))) from None


def _parse(ctx: Context) -> Matrix:
    doc = _document(ctx)
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
        keys, name_key = en.KEYS[key]
        return _array(ctx, doc, key, keys, name_key, make, ident)

    return Matrix(
        path=ctx.file,
        sources={s.id: s for s in _sources(ctx, doc.get("sources", {}))},
        cuda_majors=array("cuda_major", en.cuda_major, lambda e: str(e.major)),
        driver_branches=array("driver_branch", en.driver_branch, lambda e: str(e.branch)),
        cuda=array("cuda", en.cuda_release, lambda e: str(e.version)),
        archs=array("arch", en.arch_info, lambda e: e.name),
        cudnn=array("cudnn", en.cudnn, lambda e: e.label),
        torchvision=array("torchvision", en.companion("torchvision"), lambda e: str(e.version)),
        torchaudio=array("torchaudio", en.companion("torchaudio"), lambda e: str(e.version)),
        torch=array("torch", en.torch_release, lambda e: str(e.version)),
        os=array("os", en.os_base, lambda e: e.name),
        cuda_images=array("cuda_image", en.cuda_image, lambda e: str(e.cuda)),
        brand_sets=_brand_sets(ctx, doc.get("brand_sets", {})),
        gpu_products=array("gpu_product", en.gpu_product, lambda e: e.name),
        publish=parse_publish(ctx, doc.get("publish", [])),
        onnxruntime=array("onnxruntime", oe.onnxruntime, lambda e: e.id),
        onnx_tools=array("onnx_tool", oe.onnx_tool, lambda e: e.name),
        notebook_tools=array("notebook_tool", oe.notebook_tool, lambda e: e.name),
        nvidia_wheels=array("nvidia_wheel", wf.nvidia_wheel, wf.ident),
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
    for index, raw in en.entries_of(ctx, (key,), key, doc.get(key, [])):
        entry = en.open_entry(ctx, (key, index), f"{key}[{index}]", raw, keys, name_key)
        item = make(entry)
        name = ident(item)
        if name in seen:
            first = ctx.locator.line_of((key, seen[name]))
            where = f"at line {first}" if first else f"{key}[{seen[name]}]"
            ctx.fail((key, index), f"{key}[{name}]", f"duplicate entry (the first is {where})")
        seen[name] = index
        items.append(item)
    return tuple(items)


def _sources(ctx: Context, raw: Any) -> Iterator[Source]:
    if not isinstance(raw, dict):
        ctx.fail(("sources",), "sources", "expected a table of [sources.<id>] tables")
    for ident, body in raw.items():
        e = Entry(ctx, ("sources", ident), f"sources.{ident}", body, ("title", "url", "confidence"))
        confidence = e.get("confidence", en.enum_of(Confidence))
        url = e.get("url", r.text)
        if not url.startswith("https://"):
            e.fail_key("url", f"expected an https:// URL, found {url!r}")
        yield Source(id=ident, title=e.get("title", r.text), url=url, confidence=confidence)


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
