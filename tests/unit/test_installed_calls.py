"""The reader of an image's distributions (builder/image/installed.py) run in this process as `torchyard lock export`
runs it inside an image: its main prints one JSON object (the Python, the machine, the prefix and every
distribution on sys.path, here folders laid out in tmp_path) and returns 0."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

import pytest

from builder.image import installed

PREFIX = "/opt/venv"


def _dist(site: Path, name: str, version: str, files: dict[str, str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for file, text in files.items():
        (info / file).write_text(text)


@pytest.fixture
def image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An image's Python: its platform answers, its prefix and a sys.path of two site folders."""
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Typing_Extensions", "4.15.0", {"WHEEL": "Tag: py3-none-any\n", "INSTALLER": "uv\n"})
    direct = {"url": "file:///wheels/addone.whl", "archive_info": {}}
    _dist(first, "addone", "0.1.0", {"WHEEL": "Tag: cp38-cp38-linux_x86_64\n", "direct_url.json": json.dumps(direct)})
    _dist(second, "typing_extensions", "4.0.0", {"INSTALLER": "pip\n"})  # shadowed by the first one
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    monkeypatch.setattr(sys, "prefix", PREFIX)
    monkeypatch.setattr(platform, "python_version", lambda: "3.8.20")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")


DISTS: list[dict[str, Any]] = [
    {
        "name": "addone",
        "version": "0.1.0",
        "tags": ["cp38-cp38-linux_x86_64"],
        "installer": None,
        "direct_url": {"url": "file:///wheels/addone.whl", "archive_info": {}},
    },
    {"name": "typing-extensions", "version": "4.15.0", "tags": ["py3-none-any"], "installer": "uv", "direct_url": None},
]


def test_main_prints_one_json_line_of_the_environment_and_returns_0(
    image: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert installed.main() == 0
    out, err = capsys.readouterr()
    report = {"schema": 1, "python": "3.8.20", "machine": "aarch64", "prefix": PREFIX, "dists": DISTS}
    assert (out, err) == (json.dumps(report) + "\n", "")


def test_main_with_no_distribution_prints_an_empty_list(
    image: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty")])
    assert installed.main() == 0
    report = {"schema": 1, "python": "3.8.20", "machine": "aarch64", "prefix": PREFIX, "dists": []}
    assert capsys.readouterr().out == json.dumps(report) + "\n"
