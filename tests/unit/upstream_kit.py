"""Upstream for the unit tests of `matrix verify`, replayed from recorded documents (tests/unit/data/upstream,
see record.py there): PyPI's PEP 691 pages, wheel files (built here around the recorded METADATA, or the
recorded byte ranges of two real torch wheels), PyTorch's PEP 503 variant pages; served through the fake
network of http_kit with Range support. Tests edit `Upstream` to stage a missing version, a yanked file,
a changed pin, a busy or broken server, a truncated wheel, a redirect."""

from __future__ import annotations

import base64
import copy
import gzip
import io
import json
import random
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from http_kit import Answer, Net, Sent

DATA = Path(__file__).resolve().parent / "data" / "upstream"
FILES = "https://files.pythonhosted.org/packages"
PYTORCH = "https://download.pytorch.org/whl"


def recorded_page(project: str) -> dict[str, Any]:
    page: dict[str, Any] = json.loads((DATA / f"pypi-{project}.json").read_text())
    return page


def recorded_metadata(project: str, version: str) -> str:
    return (DATA / f"{project}-{version}.METADATA").read_text()


def build_wheel(
    filename: str,
    metadata: str,
    *,
    payload: int = 4096,
    dist_info_first: bool = False,
    wheel: str = "Wheel-Version: 1.0\n",
) -> bytes:
    """A real wheel file (zip) with this METADATA (and WHEEL), some incompressible payload and a RECORD."""
    name, version = filename.split("-")[:2]
    dist = f"{name}-{version}.dist-info"
    noise = random.Random(filename).randbytes(payload)  # incompressible, and the same in every run
    members = [(f"{name}/__init__.py", b"# test\n"), (f"{name}/payload.bin", noise)]
    if name == "torch":  # what torch.__version__ says: PyPI's aarch64 CPU wheels carry no local part
        local = "" if "aarch64" in filename or "+" in version else "+cu124"
        members.append(("torch/version.py", f"__version__ = '{version}{local}'\n".encode()))
    meta = [(f"{dist}/METADATA", metadata.encode()), (f"{dist}/WHEEL", wheel.encode())]
    ordered = meta + members if dist_info_first else members + meta
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in ordered:
            archive.writestr(member, data)
        archive.writestr(f"{dist}/RECORD", "".join(f"{m},,\n" for m, _ in ordered))
    return buffer.getvalue()


@dataclass
class SparseFile:
    """A file of which only recorded byte ranges are known (a real 500 MB wheel, about 100 KB of it)."""

    size: int
    ranges: list[tuple[int, bytes]]

    @classmethod
    def recorded(cls, filename: str) -> SparseFile:
        record = json.loads(gzip.decompress((DATA / f"{filename}.ranges.json.gz").read_bytes()))
        return cls(record["size"], [(start, base64.b64decode(data)) for start, data in record["ranges"]])

    def read(self, start: int, end: int) -> bytes:
        for at, data in self.ranges:
            if at <= start and end <= at + len(data):
                return data[start - at : end - at]
        raise AssertionError(f"bytes {start}-{end - 1} were never recorded: the reader asked for more than it should")


Body = bytes | SparseFile


def serve_range(sent: Sent, body: Body, *, ranges: bool = True) -> Answer:
    size = body.size if isinstance(body, SparseFile) else len(body)
    spec = sent.headers.get("Range")
    if spec is None or not ranges:
        assert isinstance(body, bytes), "a sparse file can only be read by ranges"
        return Answer(200, body, {"Content-Length": str(size)})
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", spec)
    assert match, spec
    if match[1] == "":
        start, end = max(0, size - int(match[2])), size
    else:
        start, end = int(match[1]), min(size, int(match[2]) + 1 if match[2] else size)
    data = body.read(start, end) if isinstance(body, SparseFile) else body[start:end]
    return Answer(206, data, {"Content-Range": f"bytes {start}-{end - 1}/{size}", "Content-Length": str(len(data))})


@dataclass
class Upstream:
    """PyPI and PyTorch's index as the recorded documents say, editable per test."""

    pages: dict[str, dict[str, Any]] = field(default_factory=dict)  # PyPI project -> PEP 691 page
    metadata: dict[str, str] = field(default_factory=dict)  # wheel filename -> METADATA text
    variant_pages: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (variant, project) -> files
    overrides: list[Callable[[Sent], Answer | Exception | None]] = field(default_factory=list)
    files: dict[str, Body] = field(default_factory=dict)  # url -> content, where a test gives one

    @classmethod
    def recorded(cls) -> Upstream:
        up = cls({p: recorded_page(p) for p in ("torch", "torchvision", "torchaudio")})
        for project, page in up.pages.items():
            for f in page["files"]:
                version = f["filename"].split("-")[1]
                up.metadata[f["filename"]] = recorded_metadata(project, version)
        for variant in ("cu118", "cpu"):
            up.variant_pages[variant, "torch"] = [
                f"torch-2.5.1+{variant}-cp3{m}-cp3{m}-linux_x86_64.whl" for m in range(9, 14)
            ]
            up.variant_pages[variant, "torchvision"] = [
                f"torchvision-0.20.1+{variant}-cp3{m}-cp3{m}-linux_x86_64.whl" for m in range(9, 14)
            ]
            up.variant_pages[variant, "torchaudio"] = [
                f"torchaudio-2.5.1+{variant}-cp3{m}-cp3{m}-linux_x86_64.whl" for m in range(9, 14)
            ]
        return up

    def page(self, project: str) -> dict[str, Any]:
        return self.pages[project]

    def file(self, project: str, filename: str) -> dict[str, Any]:
        return next(f for f in self.pages[project]["files"] if f["filename"] == filename)

    def drop(self, project: str, pattern: str) -> None:
        self.pages[project]["files"] = [
            f for f in self.pages[project]["files"] if not re.search(pattern, f["filename"])
        ]

    def attach(self, net: Net) -> Net:
        for override in self.overrides:
            net.on(override)
        return net.on(self.handle)

    def handle(self, sent: Sent) -> Answer | None:
        url = sent.url.split("?")[0]
        match = re.fullmatch(r"https://pypi\.org/simple/([^/]+)/", url)
        if match:
            page = self.pages.get(match[1])
            if page is None:
                return Answer(404, b"not found")
            return Answer(200, json.dumps(page).encode(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})
        match = re.fullmatch(rf"{PYTORCH}/([^/]+)/([^/]+)/", url)
        if match:
            names = self.variant_pages.get((match[1], match[2]))
            if names is None:
                return Answer(404, b"")
            links = "".join(f'<a href="/whl/{match[1]}/{n}#sha256={"0" * 64}">{n}</a><br/>\n' for n in names)
            return Answer(200, f"<html><body>{links}</body></html>", {"Content-Type": "text/html"})
        if url.startswith((FILES, PYTORCH)):
            return serve_range(sent, self._content(url))
        return None

    def _content(self, url: str) -> Body:
        """A file put in `files`, else a wheel built around the METADATA as it is now (tests edit it)."""
        if url in self.files:
            return self.files[url]
        filename = url.rsplit("/", 1)[1]
        return build_wheel(filename, self.metadata.get(filename) or _variant_metadata(filename))


def _variant_metadata(filename: str) -> str:
    name, version = filename.split("-")[:2]
    requires = "Requires-Dist: torch (==2.5.1)\n" if name != "torch" else ""
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}"


def with_pin(metadata: str, old: str, new: str) -> str:
    assert metadata.count(old) == 1, old
    return metadata.replace(old, new)


def copied(page: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(page)
