"""The image's constraints script (builder/image/pip_guard.py) run in this process as the build stage runs it
(`python pip_guard.py constrain VENV DIR`): what main prints, returns and writes for a venv laid out in tmp_path,
its usage line for any other arguments, and the Watch's passing of a stream's other attributes to the stream."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from builder.image import pip_guard

LAUNCHERS = ("pip", "pip3", "pip3.11")
INSTALLERS_LAUNCHER = "#!/opt/venv/bin/python\n# the installer's launcher\n"
USAGE = "usage: pip_guard.py constrain VENV DIR\n"


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    root = tmp_path / "venv"
    site = root / "lib" / "python3.11" / "site-packages"
    for name, version in (("torch", "2.14.1"), ("Typing_Extensions", "4.15.0"), ("pip", "25.3")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (root / "bin").mkdir()
    for name in (*LAUNCHERS, "python", "torchrun"):
        (root / "bin" / name).write_text(INSTALLERS_LAUNCHER)
    return root


def test_constrain_writes_the_constraints_and_the_guard_and_says_where(
    venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "opt-torchyard"
    assert pip_guard.main(["constrain", str(venv), str(out)]) == 0
    assert capsys.readouterr() == (f"pip_guard: constraints in {out}/image-constraints.txt\n", "")
    assert sorted(os.listdir(out)) == ["image-constraints.txt", "pip_guard.py"]
    text = (out / "image-constraints.txt").read_text(encoding="utf-8")
    assert text == pip_guard.HEADER + "torch==2.14.1\ntyping-extensions==4.15.0\n"
    assert (out / "pip_guard.py").read_bytes() == Path(pip_guard.__file__).read_bytes()
    launcher = pip_guard.LAUNCHER.format(python=f"{venv}/bin/python", guard=f"{out}/pip_guard.py")
    for name in LAUNCHERS:
        assert (venv / "bin" / name).read_text(encoding="utf-8") == launcher
    assert (venv / "bin" / "torchrun").read_text() == (venv / "bin" / "python").read_text() == INSTALLERS_LAUNCHER


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["constrain"],
        ["constrain", "VENV"],
        ["constrain", "VENV", "DIR", "more"],
        ["CONSTRAIN", "VENV", "DIR"],
        ["install", "VENV", "DIR"],
        ["VENV", "constrain", "DIR"],
    ],
)
def test_other_arguments_get_the_usage_line_and_2_and_nothing_is_written(
    argv: list[str], venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "opt-torchyard"
    named = {"VENV": str(venv), "DIR": str(out)}
    before = {path: path.read_bytes() for path in venv.rglob("*") if path.is_file()}
    assert pip_guard.main([named.get(arg, arg) for arg in argv]) == 2
    assert capsys.readouterr() == ("", USAGE)
    assert not out.exists()
    assert {path: path.read_bytes() for path in venv.rglob("*") if path.is_file()} == before


# ---- Watch ----


def test_a_watch_passes_other_attributes_to_its_stream() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="latin-1", newline="\n")
    watch = pip_guard.Watch(stream)
    assert watch.encoding == "latin-1"
    assert watch.isatty() is False
    watch.write("café\n")
    assert raw.getvalue() == b""  # held in the wrapper until flushed
    watch.flush()
    assert raw.getvalue() == "café\n".encode("latin-1")


def test_a_watch_has_no_attribute_its_stream_lacks() -> None:
    watch = pip_guard.Watch(io.StringIO())
    with pytest.raises(AttributeError, match="nosuch"):
        watch.nosuch  # noqa: B018
