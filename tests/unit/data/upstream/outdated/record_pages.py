"""Record the PyPI pages the unit tests of `matrix outdated` replay (run by hand, with network):

    .venv/bin/python tests/unit/data/upstream/outdated/record_pages.py

pypi-<project>.json: PyPI's PEP 691 page of each project `matrix outdated` tracks, every release kept with
its first uploaded Linux (or pure-Python) wheel per machine (x86_64, aarch64: `matrix sync --nvidia-wheel` reads
both tags), every Linux wheel of the newest final release (`matrix sync --onnxruntime` reads its Pythons), and every
file of a release that has no such wheel, fields untouched: what outdated and sync read (versions, platform tags,
yanked, upload-time, sha256) at a few KB a project.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import requests
from packaging.version import InvalidVersion, Version

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


def _machine(filename: str) -> str:
    return "any" if filename.endswith("-any.whl") else "aarch64" if filename.endswith("aarch64.whl") else "x86_64"


def _parsed(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def _newest(page: dict[str, Any]) -> Version | None:
    linux = {_parsed(_version(f["filename"])) for f in page["files"] if _linux(f["filename"])}
    finals = [v for v in linux if v is not None and not (v.is_prerelease or v.is_devrelease or v.is_postrelease)]
    return max(finals, default=None)


def _wanted(f: dict[str, Any], files: list[dict[str, Any]], every: bool) -> bool:
    """A Linux wheel of a machine not yet kept (each, for the newest release); other files until a Linux one is."""
    done = {_machine(k["filename"]) for k in files if _linux(k["filename"]) and not k.get("yanked")}
    if not _linux(f["filename"]):
        return not done
    return every or _machine(f["filename"]) not in done


def trim(page: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, list[dict[str, Any]]] = {}
    newest = _newest(page)
    for f in sorted(page["files"], key=lambda f: f.get("upload-time") or ""):
        version = _version(f["filename"])
        files = kept.setdefault(version, [])
        if _wanted(f, files, _parsed(version) == newest):
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
