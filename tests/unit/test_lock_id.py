"""`torchyard lock export ID`: the combination found in the matrix, pip asked as the build asks it (faked at the
process seam: unit tests start no process), and pip's installation report turned into the lock."""

from __future__ import annotations

import itertools
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from matrix_kit import real

from builder.cli.main import main
from builder.core.errors import UpstreamError
from builder.core.process import Completed
from builder.lock import resolve_id
from builder.lock.locate import PYPI
from builder.lock.resolve_id import find_combination, from_report, pip_argv

IDENT = "torch2.14.1-cu130-py3.11-debian12"
SHA = "ab" * 32


def _item(name: str, version: str, url: str | None, sha: str | None = SHA) -> dict[str, Any]:
    info: dict[str, Any] = {"url": url, "archive_info": {"hashes": {"sha256": sha}} if sha else {}} if url else {}
    return {"metadata": {"name": name, "version": version}, "download_info": info}


REPORT = {
    "version": "1",
    "install": [
        _item("Torch", "2.14.1", "https://files.pythonhosted.org/x/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"),
        _item(
            "typing_extensions", "4.15.0", "https://files.pythonhosted.org/x/typing_extensions-4.15.0-py3-none-any.whl"
        ),
        _item("local", "1.0", "file:///tmp/local-1.0-py3-none-any.whl"),
    ],
}


def test_pip_is_asked_for_the_pins_on_the_image_platform_and_python() -> None:
    c = find_combination(real(), IDENT)
    assert c is not None and c.id == IDENT
    argv = pip_argv(c, Path("/t"), Path("/r.json"), "/ca.pem")
    assert argv[-3:] == ["torch==2.14.1", f"torchvision=={c.torch.torchvision}", f"torchaudio=={c.torch.torchaudio}"]
    pairs = dict(itertools.pairwise(argv))
    assert (pairs["--python-version"], pairs["--abi"], pairs["--index-url"], pairs["--cert"]) == (
        "3.11",
        "cp311",
        PYPI,
        "/ca.pem",
    )
    platforms = [argv[i + 1] for i, a in enumerate(argv) if a == "--platform"]
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_28_x86_64" in platforms  # Debian 12's glibc down
    assert {"--dry-run", "--only-binary=:all:", "--isolated", "--ignore-installed"} <= set(argv)
    assert find_combination(real(), "torch0.0.1-cu000-py3.11-debian12") is None


def test_the_report_becomes_the_lock_with_what_it_cannot_name_left_out() -> None:
    lock = from_report(REPORT, "x", "3.11", "x86_64", PYPI)
    assert [(p.name, p.version, p.artifact.filename, p.artifact.sha256) for p in lock.packages] == [
        ("torch", "2.14.1", "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", SHA),
        ("typing-extensions", "4.15.0", "typing_extensions-4.15.0-py3-none-any.whl", SHA),
    ]
    assert [(x.name, x.why) for x in lock.left_out] == [
        ("local", "pip named no file with a sha256 (file:///tmp/local-1.0-py3-none-any.whl)")
    ]


def _fake_pip(report: dict[str, Any] | None, code: int = 0) -> Any:
    def run(argv: list[str], **kwargs: object) -> Completed:
        if report is not None:
            Path(argv[argv.index("--report") + 1]).write_text(json.dumps(report))
        return Completed(tuple(argv), code, ("ERROR: No matching distribution found for torch==2.14.1",))

    return run


def test_lock_export_of_an_id_writes_both_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(resolve_id, "run_command", _fake_pip(REPORT))
    with pytest.raises(SystemExit) as exit_:
        main(["lock", "export", IDENT, "-o", str(tmp_path)])
    assert exit_.value.code in (0, None)
    doc = tomllib.loads((tmp_path / "pylock.toml").read_text())
    assert [p["name"] for p in doc["packages"]] == ["torch", "typing-extensions"]
    assert doc["tool"]["torchyard"]["source"] == f"{IDENT} (resolved from matrix.toml's pins)"
    assert "torch==2.14.1 \\\n    --hash=sha256:" + SHA in (tmp_path / "requirements.txt").read_text()


def test_pip_failing_is_an_upstream_error_with_its_words(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(resolve_id, "run_command", _fake_pip(None, 1))
    with pytest.raises(UpstreamError, match="pip could not resolve the pins: ERROR: No matching distribution"):
        resolve_id.resolve_combination(real(), IDENT, None)
