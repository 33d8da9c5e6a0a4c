"""Record the PyPI pages the unit tests of `matrix outdated` replay (run by hand, with network):

    .venv/bin/python tests/unit/data/upstream/outdated/record_pages.py

pypi-<project>.json: PyPI's PEP 691 page of each project `matrix outdated` tracks, every release kept with
its first uploaded Linux (or pure-Python) wheel and every file of a release that has no such wheel, fields untouched:
what outdated reads (versions, platform tags, yanked, upload-time) at a few KB a project.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
CA: str | bool = os.environ.get("PIP_CERT") or True
PROJECTS = ("torch", "cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "onnxruntime-gpu", "onnxruntime")


def _version(filename: str) -> str:
    return (
        filename.split("-")[1]
        if filename.endswith(".whl")
        else filename.rsplit("-", 1)[-1].split(".tar", maxsplit=1)[0]
    )


def _linux(filename: str) -> bool:
    return filename.endswith(".whl") and ("manylinux" in filename or filename.endswith("-any.whl"))


def trim(page: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(page["files"], key=lambda f: f.get("upload-time") or ""):
        files = kept.setdefault(_version(f["filename"]), [])
        if not any(_linux(k["filename"]) and not k.get("yanked") for k in files):
            files.append(f)
    page["files"] = [f for files in kept.values() for f in files if _linux(f["filename"]) or len(files) == 1]
    return page


def main() -> None:
    session = requests.Session()
    session.verify = CA
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    for project in PROJECTS:
        page = session.get(f"https://pypi.org/simple/{project}/", headers=accept, timeout=60).json()
        (HERE / f"pypi-{project}.json").write_text(json.dumps(trim(page), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
