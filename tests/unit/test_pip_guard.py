"""The image's constraints and its pip launchers (builder/image/pip_guard.py), on a venv laid out in a folder, and
the reader of an image's distributions (builder/image/installed.py) on a site-packages folder."""

from __future__ import annotations

import io
import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from builder.image import installed, pip_guard


def _dist(
    site: Path, name: str, version: str, *, wheel: str | None = None, direct: dict[str, str] | None = None
) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("uv\n")
    if wheel is not None:
        (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n{wheel}")
    if direct is not None:
        (info / "direct_url.json").write_text(json.dumps(direct))


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    root = tmp_path / "venv"
    site = root / "lib" / "python3.11" / "site-packages"
    for name, version in (
        ("torch", "2.14.1"),
        ("Typing_Extensions", "4.15.0"),
        ("pip", "25.3"),
        ("setuptools", "80.9.0"),
        ("nvidia-cudnn-cu13", "9.13.0.50"),
    ):
        _dist(site, name, version)
    (root / "bin").mkdir()
    for name in ("pip", "pip3", "pip3.11", "python", "torchrun"):
        (root / "bin" / name).write_text("#!/opt/venv/bin/python\n# the installer's launcher\n")
    return root


def test_constrain_pins_every_distribution_but_the_installers(venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "opt-torchyard"
    path = pip_guard.constrain(str(venv), str(out), pip_guard.site_of(str(venv)))
    text = Path(path).read_text()
    assert Path(path) == out / "image-constraints.txt"
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "nvidia-cudnn-cu13==9.13.0.50",
        "torch==2.14.1",
        "typing-extensions==4.15.0",
    ]
    assert "PIP_CONSTRAINT= pip install" in text  # the file says how to lift it
    assert Path(path).stat().st_mtime == 0 and (out / "pip_guard.py").stat().st_mtime == 0


def test_constrain_points_the_pip_launchers_at_the_guard_and_leaves_the_rest(venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "opt-torchyard"
    pip_guard.constrain(str(venv), str(out), pip_guard.site_of(str(venv)))
    assert (out / "pip_guard.py").read_bytes() == Path(pip_guard.__file__).read_bytes()
    for name in ("pip", "pip3", "pip3.11"):
        launcher = (venv / "bin" / name).read_text()
        assert launcher.startswith(f"#!{venv}/bin/python\n")
        assert repr(str(out / "pip_guard.py")) in launcher and "guard.run()" in launcher
    assert "guard" not in (venv / "bin" / "torchrun").read_text()
    compile((venv / "bin" / "pip").read_text(), "pip", "exec")


def _run(monkeypatch: pytest.MonkeyPatch, printed: str, code: int, constraint: str | None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    if constraint is None:
        monkeypatch.delenv("PIP_CONSTRAINT", raising=False)
    else:
        monkeypatch.setenv("PIP_CONSTRAINT", constraint)

    def fake_pip() -> int:
        print(printed)  # pip prints "The conflict is caused by: ..." on stdout
        print("ERROR: ResolutionImpossible", file=sys.stderr)
        return code

    result = pip_guard.run(fake_pip)
    assert (sys.stdout, sys.stderr) == (out, err)  # given back
    return result, out.getvalue(), err.getvalue()


CONFLICT = (
    "The conflict is caused by:\n    The user requested torch==2.5.1\n    The user requested (constraint) torch==2.14.1"
)


def test_a_constraint_conflict_gets_one_line_naming_the_file_and_how_to_lift_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = _run(monkeypatch, CONFLICT, 1, "/opt/torchyard/image-constraints.txt")
    assert code == 1 and out == CONFLICT + "\n"
    assert err.splitlines()[-1] == pip_guard.HINT.format(path="/opt/torchyard/image-constraints.txt")
    assert "PIP_CONSTRAINT= pip install" in err


@pytest.mark.parametrize(
    ("printed", "code", "constraint"),
    [
        ("ERROR: No matching distribution found for nosuch", 1, "/c.txt"),  # another failure
        (CONFLICT, 0, "/c.txt"),  # it did not fail
        (CONFLICT, 1, None),  # the constraints were lifted: pip's own words only
        (CONFLICT, 1, ""),
    ],
)
def test_no_line_is_added_otherwise(monkeypatch: pytest.MonkeyPatch, printed: str, code: int, constraint: str) -> None:
    result, _, err = _run(monkeypatch, printed, code, constraint)
    assert result == code and "torchyard:" not in err


def test_installed_lists_name_version_tags_installer_and_a_local_origin(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "Typing_Extensions", "4.15.0", wheel="Tag: py3-none-any\n")
    _dist(site, "six", "1.17.0", wheel="Tag: py3-none-any\nTag: py2-none-any\n")
    _dist(site, "addone", "0.1.0", wheel="Tag: cp311-cp311-linux_x86_64\n", direct={"url": "file:///tmp/w/addone.whl"})
    _dist(site, "nowheel", "1.0")
    found = installed.describe(list(metadata.distributions(path=[str(site)])))
    assert found == [
        {
            "name": "addone",
            "version": "0.1.0",
            "tags": ["cp311-cp311-linux_x86_64"],
            "installer": "uv",
            "direct_url": {"url": "file:///tmp/w/addone.whl"},
        },
        {"name": "nowheel", "version": "1.0", "tags": [], "installer": "uv", "direct_url": None},
        {
            "name": "six",
            "version": "1.17.0",
            "tags": ["py2-none-any", "py3-none-any"],
            "installer": "uv",
            "direct_url": None,
        },
        {
            "name": "typing-extensions",
            "version": "4.15.0",
            "tags": ["py3-none-any"],
            "installer": "uv",
            "direct_url": None,
        },
    ]
