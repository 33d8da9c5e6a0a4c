"""Record the upstream documents the unit tests of `matrix verify` replay (run by hand, with network):

    .venv/bin/python tests/unit/data/upstream/record.py

- pypi-<project>.json: PyPI's PEP 691 project page, trimmed to the releases the small test matrix names
  (tests/unit/matrix_kit.py: torch 2.5.1, torchvision 0.20.1, torchaudio 2.5.1; torch 2.5.0 too, a
  neighbour), fields untouched;
- <project>-<version>.METADATA: the METADATA of the cp311 linux x86_64 wheel of each;
- <wheel>.ranges.json.gz: exactly the byte ranges builder.upstream.lazywheel reads from two real torch
  wheels (dist-info at the head of the archive: 2.5.1; at its tail: 2.14.1), with the file size.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
CA: str | bool = os.environ.get("PIP_CERT") or True
RELEASES = {"torch": ["2.5.0", "2.5.1"], "torchvision": ["0.20.1"], "torchaudio": ["2.5.1"]}
WHEELS = ["torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl", "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"]


def main() -> None:
    session = requests.Session()
    session.verify = CA
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    urls: dict[str, str] = {}
    for project, versions in RELEASES.items():
        page = session.get(f"https://pypi.org/simple/{project}/", headers=accept, timeout=30).json()
        all_files = page["files"]
        page["files"] = [f for f in all_files if any(f"-{v}-" in f["filename"] for v in versions)]
        page["versions"] = versions
        (HERE / f"pypi-{project}.json").write_text(json.dumps(page, indent=1, sort_keys=True) + "\n")
        urls |= {f["filename"]: f["url"] for f in all_files}
        for version in versions:
            pattern = re.compile(rf"^{project}-{re.escape(version)}-(cp311-cp311|py3-none)-manylinux.*x86_64\.whl$")
            wheel = next(name for name in urls if pattern.match(name))
            from builder.net.http import Http

            text = _metadata(Http(verify=CA), urls[wheel])
            (HERE / f"{project}-{version}.METADATA").write_text(text)
    for name in WHEELS:
        _record_ranges(name, urls[name])


def _metadata(http: object, url: str) -> str:
    from builder.upstream.lazywheel import read_metadata

    return read_metadata(http, url)  # type: ignore[arg-type]


def _record_ranges(name: str, url: str) -> None:
    from builder.net.http import Http, Reply
    from builder.upstream.lazywheel import read_metadata

    http = Http(verify=CA)
    ranges: list[tuple[int, str]] = []
    size = 0
    original = http.get

    def recording(url: str, **kwargs: Any) -> Reply:
        nonlocal size
        reply = original(url, **kwargs)
        span = reply.header("content-range") or ""
        size = int(span.rsplit("/", 1)[1])
        start = int(span.split()[1].split("-")[0])
        ranges.append((start, base64.b64encode(reply.body).decode()))
        return reply

    http.get = recording  # type: ignore[method-assign]
    read_metadata(http, url)
    record = {"filename": name, "size": size, "ranges": ranges}
    (HERE / f"{name}.ranges.json.gz").write_bytes(gzip.compress(json.dumps(record).encode(), mtime=0))


if __name__ == "__main__":
    main()
