"""Fetch uv's binary from its wheel on the package index, with the standard library only.

Runs in the uv stage with the OS's Python, which then needs neither python3-venv nor pip: a venv and a pip
install of uv cost that stage (on the cold build's critical path) 31 s, this 8 s (docs/benchmarks.md, a loaded machine).

    python uv_fetch.py VERSION DEST [PIP_CONF]

It reads the index as pip would: PIP_CONF's `index-url`, then its `extra-index-url`s (default:
https://pypi.org/simple), the simple page of `uv` (JSON, PEP 691, where the index serves it; else HTML, PEP 503),
and takes this machine's manylinux wheel of VERSION. The link's sha256 must match the download (PyPI and the
common mirrors give it; a link without one is refused: nothing unverified lands in the build). Credentials in an
index URL go into an Authorization header to that host only, never into an error message. The CA bundle:
`$SSL_CERT_FILE` when set (the build's secret), else the OS's.

Standard library only, Python 3.8 and later: it runs with the Python of the image being built.
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import io
import json
import os
import platform
import ssl
import sys
import urllib.parse
import urllib.request
import zipfile
from html.parser import HTMLParser

PYPI = "https://pypi.org/simple"
# pip's Accept header: JSON (PEP 691) first, HTML (PEP 503) for the indexes that serve only that
SIMPLE_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
TIMEOUT = 60


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def indexes(pip_conf: str | None) -> list[str]:
    """The index URLs in pip's order: index-url (or PyPI), then the extra-index-urls."""
    parser = configparser.ConfigParser(interpolation=None)
    if pip_conf and os.path.exists(pip_conf):
        parser.read(pip_conf, encoding="utf-8")
    first = parser.get("global", "index-url", fallback="").strip() or PYPI
    return [first, *parser.get("global", "extra-index-url", fallback="").split()]


def redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def wheel_for(hrefs: list[str], version: str, machine: str) -> str | None:
    """The link of the manylinux wheel of uv VERSION for `machine` (x86_64, aarch64), the first by file name."""
    prefix = f"uv-{version}-py3-none-"
    found = []
    for href in hrefs:
        name = urllib.parse.unquote(urllib.parse.urlsplit(href).path.rsplit("/", 1)[-1])
        if not (name.startswith(prefix) and name.endswith(".whl")):
            continue
        tags = name[len(prefix) : -len(".whl")].split(".")  # manylinux_2_17_x86_64.manylinux2014_x86_64
        if any(t.startswith("manylinux") and t.endswith("_" + machine) for t in tags):
            found.append((name, href))
    return sorted(found)[0][1] if found else None


def _open(url: str, context: ssl.SSLContext, accept: str = "*/*") -> tuple[bytes, str]:
    """GET `url`: the body and its Content-Type. Credentials in the URL travel as a Basic Authorization header,
    not in the request line."""
    parts = urllib.parse.urlsplit(url)
    request = urllib.request.Request(redact(url) + (f"?{parts.query}" if parts.query else ""))
    request.add_header("Accept", accept)
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        secret = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{secret}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
        return bytes(response.read()), str(response.headers.get("Content-Type", ""))


def page_links(body: bytes, content_type: str) -> list[str]:
    """The file links of a simple-index page, JSON (PEP 691) or HTML (PEP 503), each with its `#sha256=`."""
    if "json" in content_type:
        files = json.loads(body.decode("utf-8")).get("files") or []
        links = []
        for entry in files:
            sha = (entry.get("hashes") or {}).get("sha256")
            links.append(str(entry["url"]) + (f"#sha256={sha}" if sha else ""))
        return links
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.hrefs


def _context() -> ssl.SSLContext:
    bundle = os.environ.get("SSL_CERT_FILE", "")
    return ssl.create_default_context(cafile=bundle) if bundle else ssl.create_default_context()


def fetch(version: str, dest: str, pip_conf: str | None, machine: str | None = None) -> str:
    """Write uv's binary to `dest`; returns the wheel's file name."""
    context = _context()
    machine = machine or platform.machine()
    for index in indexes(pip_conf):
        if urllib.parse.urlsplit(index).scheme not in ("http", "https"):
            continue  # a file:// index of the host's is not there in a build
        page_url = index.rstrip("/") + "/uv/"
        try:
            hrefs = page_links(*_open(page_url, context, SIMPLE_ACCEPT))
        except OSError as error:  # urllib's errors are OSErrors; the next index may have it
            print(f"uv_fetch: {redact(page_url)}: {getattr(error, 'reason', error)}", file=sys.stderr)
            continue
        href = wheel_for(hrefs, version, machine)
        if href is None:
            continue
        return _install(urllib.parse.urljoin(page_url, href), version, dest, context)
    raise SystemExit(
        f"uv_fetch: no manylinux {machine} wheel of uv {version} on {', '.join(map(redact, indexes(pip_conf)))}"
    )


def _install(url: str, version: str, dest: str, context: ssl.SSLContext) -> str:
    parts = urllib.parse.urlsplit(url)
    name = urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
    expected = dict(urllib.parse.parse_qsl(parts.fragment)).get("sha256", "")
    if not expected:
        raise SystemExit(f"uv_fetch: {name}: the index gives no sha256 for it; refusing an unverified download")
    # urljoin keeps the page's credentials for a link on the index's own host and gives none to another host
    target = urllib.parse.urlunsplit((*parts[:4], ""))
    data, _ = _open(target, context)
    if hashlib.sha256(data).hexdigest() != expected:
        raise SystemExit(f"uv_fetch: {name}: sha256 mismatch (index says {expected})")
    member = f"uv-{version}.data/scripts/uv"
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        binary = wheel.read(member)
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    with open(dest, "wb") as handle:
        handle.write(binary)
    os.chmod(dest, 0o755)
    return name


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: uv_fetch.py VERSION DEST [PIP_CONF]", file=sys.stderr)
        return 2
    name = fetch(argv[0], argv[1], argv[2] if len(argv) == 3 else None)
    print(f"uv_fetch: {argv[1]} from {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
