"""`matrix sync --nvidia-wheel` / `--onnxruntime` against PyPI's pages as recorded on 2026-12-04
(tests/unit/data/upstream/outdated, the pages `matrix outdated`'s tests replay) through the fake network, on a copy
of the real matrix.toml a test takes a release out of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from http_kit import Answer, Net, Sent

from builder.cli.main import main
from builder.core.resources import default_matrix_path
from builder.upstream.index import PYPI

DATA = Path(__file__).resolve().parent / "data" / "upstream" / "outdated"
REAL = default_matrix_path().read_text()


def recorded(project: str) -> dict[str, Any]:
    page: dict[str, Any] = json.loads((DATA / f"pypi-{project}.json").read_text())
    return page


def pypi(pages: dict[str, dict[str, Any]] | None = None) -> Net:
    """PyPI's recorded pages, a test's own version of some of them first."""
    changed = pages or {}

    def serve(sent: Sent) -> Answer | None:
        if not sent.url.startswith(f"{PYPI}/"):
            return None
        project = sent.url.removeprefix(f"{PYPI}/").strip("/")
        if project not in changed and not (DATA / f"pypi-{project}.json").is_file():
            return None
        page = changed.get(project) or recorded(project)
        return Answer(200, json.dumps(page).encode(), {"Content-Type": "application/vnd.pypi.simple.v1+json"})

    return Net().on(serve)


def without(text: str, part: str, instead: str = "") -> str:
    """The matrix text with `part` replaced (it must be there exactly once)."""
    assert text.count(part) == 1, part
    return text.replace(part, instead)


def sync(matrix: str, net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, Path]:
    """`torchyard --matrix <copy> matrix sync ARGS` on the fake network: (exit code, the matrix file)."""
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    monkeypatch.setattr("requests.Session", net.session)
    monkeypatch.setattr("builder.net.http.time.sleep", net.waits.append)
    with pytest.raises(SystemExit) as exit_:
        main(["--matrix", str(path), "matrix", "sync", *args])
    code = exit_.value.code
    assert isinstance(code, int)
    return code, path
