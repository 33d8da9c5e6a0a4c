"""The uv stage's download of uv's binary (builder/image/uv_fetch.py), against an index served on 127.0.0.1 by a
thread of this test: a real HTTP exchange, a real wheel (a zip with uv's layout)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from builder.image import uv_fetch

VERSION = "0.13.9"
X86 = f"uv-{VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
ARM = f"uv-{VERSION}-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
MUSL = f"uv-{VERSION}-py3-none-musllinux_1_1_x86_64.whl"
JSON = "application/vnd.pypi.simple.v1+json"


def wheel(binary: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"uv-{VERSION}.data/scripts/uv", binary)
        archive.writestr(f"uv-{VERSION}.dist-info/METADATA", "Name: uv\n")
    return buffer.getvalue()


class Index:
    """/simple/uv/ lists MUSL and X86 (relative links); /files/<name> serves the wheels. Requests and their
    Authorization headers are recorded."""

    def __init__(self, x86: bytes, sha: str | None) -> None:
        self.files = {X86: x86, MUSL: b"not this one"}
        self.sha = sha
        self.seen: list[tuple[str, str | None]] = []
        self.json = False  # serve the page as PEP 691 JSON (absolute paths), whatever the client accepts

    def json_page(self) -> bytes:
        files = [{"filename": MUSL, "url": f"/files/{MUSL}", "hashes": {"sha256": "00"}}]
        files.append({"filename": X86, "url": f"/files/{X86}", "hashes": {"sha256": self.sha} if self.sha else {}})
        return json.dumps({"meta": {"api-version": "1.1"}, "name": "uv", "files": files}).encode()

    def page(self) -> bytes:
        fragment = f"#sha256={self.sha}" if self.sha is not None else ""
        links = [
            f'<a href="../../files/{MUSL}#sha256=00">{MUSL}</a>',
            f'<a href="../../files/{X86}{fragment}">{X86}</a>',
        ]
        return ("<html><body>" + "".join(links) + "</body></html>").encode()


@pytest.fixture
def served() -> Iterator[tuple[Index, str]]:
    binary = b"\x7fELF uv"
    index = Index(wheel(binary), hashlib.sha256(wheel(binary)).hexdigest())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index.seen.append((self.path, self.headers.get("Authorization")))
            body = index.files.get(self.path.rsplit("/", 1)[-1])
            kind = "application/octet-stream"
            if self.path == "/simple/uv/":
                body, kind = (index.json_page(), JSON) if index.json else (index.page(), "text/html")
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", kind)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield index, f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pip.conf"
    path.write_text(text)
    return str(path)


def test_the_manylinux_wheel_of_the_machine_is_chosen() -> None:
    hrefs = [
        f"a/{MUSL}#sha256=1",
        f"b/{ARM}#sha256=2",
        f"c/{X86}#sha256=3",
        "d/uv-0.13.8-py3-none-manylinux_2_17_x86_64.whl",
    ]
    hrefs.append(f"e/uv-{VERSION}.tar.gz")
    assert uv_fetch.wheel_for(hrefs, VERSION, "x86_64") == f"c/{X86}#sha256=3"
    assert uv_fetch.wheel_for(hrefs, VERSION, "aarch64") == f"b/{ARM}#sha256=2"
    assert uv_fetch.wheel_for(hrefs, "0.14.0", "x86_64") is None


def test_the_indexes_are_pips_index_then_the_extras_else_pypi(tmp_path: Path) -> None:
    assert uv_fetch.indexes(None) == ["https://pypi.org/simple"]
    text = "[global]\nindex-url = https://corp/simple\nextra-index-url = https://a/simple\n  https://b/simple\n"
    assert uv_fetch.indexes(conf(tmp_path, text)) == ["https://corp/simple", "https://a/simple", "https://b/simple"]
    assert uv_fetch.indexes(str(tmp_path / "absent")) == ["https://pypi.org/simple"]


def test_fetch_writes_the_binary_and_sends_the_credentials_as_a_header(
    served: tuple[Index, str], tmp_path: Path
) -> None:
    index, host = served
    pip_conf = conf(tmp_path, f"[global]\nindex-url = http://user:s%40cret@{host}/simple\n")
    dest = tmp_path / "opt" / "uv" / "bin" / "uv"
    assert uv_fetch.fetch(VERSION, str(dest), pip_conf, machine="x86_64") == X86
    assert dest.read_bytes() == b"\x7fELF uv"
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o755
    assert [path for path, _ in index.seen] == ["/simple/uv/", f"/files/{X86}"]
    assert {auth for _, auth in index.seen} == {"Basic dXNlcjpzQGNyZXQ="}  # user:s@cret


def test_a_json_index_page_is_read_as_pep_691(served: tuple[Index, str], tmp_path: Path) -> None:
    index, host = served
    index.json = True
    dest = tmp_path / "uv"
    assert (
        uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"[global]\nindex-url = http://{host}/simple\n"), "x86_64")
        == X86
    )
    assert dest.read_bytes() == b"\x7fELF uv"
    index.sha = None  # a JSON entry without a sha256 is refused as an HTML link without one is
    with pytest.raises(SystemExit, match="gives no sha256 for it"):
        uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"[global]\nindex-url = http://{host}/simple\n"), "x86_64")


def test_a_wrong_digest_is_refused_and_nothing_is_written(served: tuple[Index, str], tmp_path: Path) -> None:
    index, host = served
    index.sha = "0" * 64
    dest = tmp_path / "uv"
    with pytest.raises(SystemExit, match=f"uv_fetch: {X86}: sha256 mismatch"):
        uv_fetch.fetch(VERSION, str(dest), conf(tmp_path, f"[global]\nindex-url = http://{host}/simple\n"), "x86_64")
    assert not dest.exists()


def test_a_link_without_a_digest_is_refused(served: tuple[Index, str], tmp_path: Path) -> None:
    index, host = served
    index.sha = None
    with pytest.raises(SystemExit, match="gives no sha256 for it; refusing an unverified download"):
        uv_fetch.fetch(
            VERSION, str(tmp_path / "uv"), conf(tmp_path, f"[global]\nindex-url = http://{host}/simple\n"), "x86_64"
        )
    assert [path for path, _ in index.seen] == ["/simple/uv/"]


def test_no_index_has_it_names_the_indexes_without_credentials(
    served: tuple[Index, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, host = served
    text = (
        f"[global]\nindex-url = http://u:pw@{host}/missing\nextra-index-url = file:///opt/wheels http://{host}/simple\n"
    )
    with pytest.raises(SystemExit) as raised:
        uv_fetch.fetch("9.9.9", str(tmp_path / "uv"), conf(tmp_path, text), "x86_64")
    message = str(raised.value)
    assert (
        message
        == f"uv_fetch: no manylinux x86_64 wheel of uv 9.9.9 on http://{host}/missing, file:///opt/wheels, http://{host}/simple"
    )
    assert "pw" not in message and "pw" not in capsys.readouterr().err


def test_main_usage_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert uv_fetch.main([]) == 2
    assert capsys.readouterr().err == "usage: uv_fetch.py VERSION DEST [PIP_CONF]\n"
