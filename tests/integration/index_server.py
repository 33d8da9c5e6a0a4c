"""A package index on 127.0.0.1 for the tests: PEP 691 JSON pages (PyPI's shape), PEP 503 HTML pages (PyTorch's
per-variant indexes), and real wheel files built here, served with HTTP range requests (bytes=a-b, bytes=-n),
counting what it sends."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def wheel(filename: str, requires: list[str], *, payload: int = 2_000_000, requires_python: str | None = None) -> bytes:
    """A wheel as installers expect it: the package, dist-info (METADATA, WHEEL, RECORD with hashes) last."""
    name, version = filename.split("-")[:2]
    dist = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += f"Requires-Python: {requires_python}\n" if requires_python else ""
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    tag = filename[:-4].split("-", 2)[2]
    members = [
        (f"{name}/__init__.py", b"__version__ = '%s'\n" % version.encode()),
        (f"{name}/_payload.bin", random.Random(filename).randbytes(payload)),  # incompressible: the bulk of it
        (f"{dist}/METADATA", metadata.encode()),
        (
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: torchyard-tests\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        ),
    ]
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in members
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in [*members, (f"{dist}/RECORD", (record + f"{dist}/RECORD,,\n").encode())]:
            archive.writestr(path, data)
    return buffer.getvalue()


@dataclass
class Index:
    host: str = ""
    files: dict[str, bytes] = field(default_factory=dict)  # filename -> wheel
    projects: dict[str, list[str]] = field(default_factory=dict)  # PyPI project -> filenames
    variants: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (variant, project) -> filenames
    yanked: dict[str, str] = field(default_factory=dict)
    sent: list[tuple[str, str | None, int]] = field(default_factory=list)  # (path, Range, bytes)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def add(self, project: str, filename: str, data: bytes, variant: str | None = None) -> None:
        self.files[filename] = data
        if variant is None:
            self.projects.setdefault(project, []).append(filename)
        else:
            self.variants.setdefault((variant, project), []).append(filename)

    def page(self, project: str) -> dict[str, object]:
        files = [
            {
                "filename": name,
                "url": f"/files/{name}",
                "hashes": {"sha256": hashlib.sha256(self.files[name]).hexdigest()},
                "size": len(self.files[name]),
                "upload-time": "2024-10-29T17:00:00.000000Z",
                "yanked": self.yanked.get(name, False),
            }
            for name in self.projects.get(project, [])
        ]
        return {"meta": {"api-version": "1.1"}, "name": project, "files": files}

    def served_bytes(self, suffix: str = ".whl") -> int:
        return sum(size for path, _, size in self.sent if path.endswith(suffix))


def _handler(index: Index) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            with index.lock:
                index.sent.append((self.path, self.headers.get("Range"), len(body)))

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            match = re.fullmatch(r"/simple/([^/]+)/", path)
            if match and match[1] in index.projects:
                body = json.dumps(index.page(match[1])).encode()
                self._send(200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
                return
            match = re.fullmatch(r"/whl/([^/]+)/([^/]+)/", path)
            if match and (match[1], match[2]) in index.variants:
                links = "".join(
                    f'<a href="/files/{n}#sha256={hashlib.sha256(index.files[n]).hexdigest()}">{n}</a><br>\n'
                    for n in index.variants[match[1], match[2]]
                )
                self._send(
                    200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), {"Content-Type": "text/html"}
                )
                return
            if path.startswith("/files/") and path[len("/files/") :] in index.files:
                self._file(index.files[path[len("/files/") :]])
                return
            self._send(404, b"not found", {})

        do_HEAD = do_GET

        def _file(self, data: bytes) -> None:
            spec = self.headers.get("Range")
            match = re.fullmatch(r"bytes=(\d*)-(\d*)", spec or "")
            if match is None:
                self._send(200, data, {"Accept-Ranges": "bytes"})
                return
            size = len(data)
            start, end = (
                (size - int(match[2]), size - 1) if not match[1] else (int(match[1]), int(match[2] or size - 1))
            )
            start, end = max(start, 0), min(end, size - 1)
            headers = {"Content-Range": f"bytes {start}-{end}/{size}", "Accept-Ranges": "bytes"}
            self._send(206, data[start : end + 1], headers)

    return Handler


@contextmanager
def serving(index: Index) -> Iterator[Index]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    index.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
