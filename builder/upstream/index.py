"""A package index's project page: PEP 691 JSON where the index speaks it (PyPI), PEP 503 HTML otherwise
(PyTorch's download.pytorch.org/whl/<variant>): every file with its URL, size, hash, Requires-Python and
yanked status."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin

from packaging.utils import canonicalize_name

from builder.net.cache import CacheKind
from builder.net.http import Http

PYPI = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


class IndexFormatError(ValueError):
    """The page is neither PEP 691 JSON nor a PEP 503 page."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    size: int | None
    sha256: str | None
    requires_python: str | None
    yanked: bool
    yanked_reason: str | None
    upload_time: str | None = None  # PEP 700 (JSON pages only)


@dataclass(frozen=True)
class ProjectPage:
    name: str
    url: str  # the page itself: upstream evidence in reports
    files: tuple[IndexFile, ...]

    def wheels(self) -> tuple[IndexFile, ...]:
        return tuple(f for f in self.files if f.filename.endswith(".whl"))


def project_url(index_url: str, project: str) -> str:
    return f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"


def read_project(http: Http, index_url: str, project: str) -> ProjectPage | None:
    """The project's page on the index; None when the index does not have the project (404).
    Unreachable / TooLarge / BudgetSpent come from the Http client; IndexFormatError on a bad page."""
    url = project_url(index_url, project)
    reply = http.get(url, headers={"Accept": ACCEPT}, cache=CacheKind.MUTABLE)
    if reply.status == 404:
        return None
    if not reply.ok:
        raise IndexFormatError(f"{url} answered HTTP {reply.status}")
    kind = (reply.header("content-type") or "").split(";")[0].strip()
    if kind == JSON_TYPE or (kind.endswith("json") and reply.body.lstrip().startswith(b"{")):
        return _from_json(project, reply.url, reply.body)
    return _from_html(project, reply.url, reply.body)


def _from_json(project: str, url: str, body: bytes) -> ProjectPage:
    try:
        data = json.loads(body)
        files = tuple(_json_file(url, entry) for entry in data["files"])
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexFormatError(f"{url}: not a PEP 691 project page ({type(exc).__name__})") from None
    return ProjectPage(project, url, files)


def _json_file(page: str, entry: dict[str, Any]) -> IndexFile:
    yanked = entry.get("yanked", False)
    size = entry.get("size")
    return IndexFile(
        filename=str(entry["filename"]),
        url=urljoin(page, str(entry["url"])),
        size=int(size) if isinstance(size, int) else None,
        sha256=(entry.get("hashes") or {}).get("sha256"),
        requires_python=entry.get("requires-python") or None,
        yanked=bool(yanked),
        yanked_reason=yanked if isinstance(yanked, str) and yanked else None,
        upload_time=entry.get("upload-time") or None,
    )


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open, self._text = dict(attrs), ""

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.found.append((self._open, self._text.strip()))
            self._open = None


def _from_html(project: str, url: str, body: bytes) -> ProjectPage:
    parser = _Anchors()
    try:
        parser.feed(body.decode("utf-8", errors="replace"))
    except AssertionError as exc:  # html.parser's way of giving up
        raise IndexFormatError(f"{url}: not a PEP 503 project page ({exc})") from None
    if b"<" not in body:
        raise IndexFormatError(f"{url}: not a PEP 503 project page")
    files = []
    for attrs, text in parser.found:
        href = attrs.get("href")
        if not href:
            continue
        link, fragment = urldefrag(urljoin(url, href))
        name = text or link.rsplit("/", 1)[-1]
        digest = fragment.split("=", 1)[1] if fragment.startswith("sha256=") else None
        yanked = "data-yanked" in attrs
        reason = attrs.get("data-yanked")
        python = attrs.get("data-requires-python")
        files.append(
            IndexFile(
                filename=name,
                url=link,
                size=None,
                sha256=digest,
                requires_python=html.unescape(python) if python else None,
                yanked=yanked,
                yanked_reason=reason or None,
            )
        )
    return ProjectPage(project, url, tuple(files))
