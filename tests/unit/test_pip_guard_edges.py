"""Edges of the image's constraints and pip launchers (builder/image/pip_guard.py): METADATA that is not ASCII or not
UTF-8, a body that is not read, a second run into the same folder, a launcher that is a symbolic link, the times
of the written files, the locale, the Watch's first answer and site_of's refusal."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from builder.image import pip_guard

LAUNCHERS = ("pip", "pip3", "pip3.11")


def _dist(site: Path, name: str, version: str, more: bytes = b"") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    head = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    (info / "METADATA").write_bytes(head + more)


def _venv(root: Path, *dists: tuple[str, str]) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name, version in dists:
        _dist(site, name, version)
    (root / "bin").mkdir()
    for name in (*LAUNCHERS, "python", "torchrun"):
        (root / "bin" / name).write_text("#!/opt/venv/bin/python\n# the installer's launcher\n")
    return root


# ---- reading METADATA ----


def test_metadata_is_read_as_utf8_whatever_the_locale(tmp_path: Path, c_locale: None) -> None:
    _dist(tmp_path, "Café-Tools", "1.0")
    _dist(tmp_path, "torch", "2.14.1")
    assert pip_guard.installed(str(tmp_path)) == ["café-tools==1.0", "torch==2.14.1"]


def test_metadata_that_is_not_utf8_is_read_with_replacements(tmp_path: Path) -> None:
    _dist(tmp_path, "latin", "1.0", b"Author: Jos\xe9 Mart\xednez\n\nA description in Latin-1: caf\xe9\n")
    _dist(tmp_path, "torch", "2.14.1")
    assert pip_guard.installed(str(tmp_path)) == ["latin==1.0", "torch==2.14.1"]


def test_only_the_headers_of_metadata_are_parsed_not_its_body(tmp_path: Path) -> None:
    """The body (the long description) is not parsed as MIME: one that nests message parts deeper than Python's
    recursion limit would stop a full parse."""
    depth = 2 * sys.getrecursionlimit()
    body = "Content-Type: message/rfc822\n\n" * depth
    _dist(tmp_path, "deep", "1.0", f"Content-Type: message/rfc822\n\n{body}".encode())
    assert pip_guard.installed(str(tmp_path)) == ["deep==1.0"]


# ---- constrain ----


def test_a_second_run_into_the_same_folder_writes_the_same_files(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "venv", ("torch", "2.14.1"), ("pip", "25.3"))
    out = tmp_path / "opt-torchyard"
    out.mkdir()
    site = pip_guard.site_of(str(venv))
    first = pip_guard.constrain(str(venv), str(out), site)
    text = Path(first).read_text(encoding="utf-8")
    assert pip_guard.constrain(str(venv), str(out), site) == first == str(out / "image-constraints.txt")
    assert Path(first).read_text(encoding="utf-8") == text == pip_guard.HEADER + "torch==2.14.1\n"
    assert sorted(os.listdir(out)) == ["image-constraints.txt", "pip_guard.py"]


def test_the_written_files_are_utf8_whatever_the_locale(tmp_path: Path, c_locale: None) -> None:
    venv = _venv(tmp_path / "vénv", ("Café-Tools", "1.0"), ("torch", "2.14.1"))
    out = tmp_path / "opt-torchyard-é"
    path = pip_guard.constrain(str(venv), str(out), pip_guard.site_of(str(venv)))
    expected = pip_guard.HEADER + "café-tools==1.0\ntorch==2.14.1\n"
    assert Path(path).read_bytes() == expected.encode("utf-8")
    launcher = pip_guard.LAUNCHER.format(python=f"{venv}/bin/python", guard=str(out / "pip_guard.py"))
    assert "é" in launcher
    for name in LAUNCHERS:
        assert (venv / "bin" / name).read_bytes() == launcher.encode("utf-8")


def test_a_launcher_that_is_a_symbolic_link_is_left_alone_with_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _venv(tmp_path / "venv", ("torch", "2.14.1"))
    os_pip = tmp_path / "usr" / "bin" / "pip3"
    os_pip.parent.mkdir(parents=True)
    os_pip.write_text("#!/usr/bin/python3\n# the OS's pip\n")
    (venv / "bin" / "pip3").unlink()
    (venv / "bin" / "pip3").symlink_to(os_pip)
    work = tmp_path / "work"  # the working directory holds no pip3 of its own
    work.mkdir()
    monkeypatch.chdir(work)
    out = tmp_path / "opt-torchyard"
    pip_guard.constrain(str(venv), str(out), pip_guard.site_of(str(venv)))
    assert os.readlink(venv / "bin" / "pip3") == str(os_pip)
    assert os_pip.read_text() == "#!/usr/bin/python3\n# the OS's pip\n"
    launcher = pip_guard.LAUNCHER.format(python=f"{venv}/bin/python", guard=str(out / "pip_guard.py"))
    assert (venv / "bin" / "pip").read_text() == (venv / "bin" / "pip3.11").read_text() == launcher


def test_the_constraints_and_the_guard_have_both_times_at_the_epoch(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "venv", ("torch", "2.14.1"))
    out = tmp_path / "opt-torchyard"
    path = pip_guard.constrain(str(venv), str(out), pip_guard.site_of(str(venv)))
    for written in (path, str(out / "pip_guard.py")):
        found = os.stat(written)  # before any read, which could move the access time
        assert (found.st_atime, found.st_mtime) == (0, 0)


# ---- Watch, site_of ----


def test_a_watch_has_seen_nothing_until_a_constraint_is_written() -> None:
    stream = io.StringIO()
    watch = pip_guard.Watch(stream)
    assert watch.seen is False
    assert watch.write("Collecting torch\n") == len("Collecting torch\n")
    assert watch.seen is False
    watch.write("The user requested (constraint) torch==2.14.1\n")
    assert watch.seen is True
    assert stream.getvalue() == "Collecting torch\nThe user requested (constraint) torch==2.14.1\n"


@pytest.mark.parametrize("pythons", [(), ("python3.11", "python3.12")])
def test_a_venv_without_exactly_one_site_packages_is_refused(tmp_path: Path, pythons: tuple[str, ...]) -> None:
    lib = tmp_path / "venv" / "lib"
    lib.mkdir(parents=True)
    (lib / "pkgconfig").mkdir()
    for name in pythons:
        (lib / name / "site-packages").mkdir(parents=True)
    with pytest.raises(SystemExit) as raised:
        pip_guard.site_of(str(tmp_path / "venv"))
    found = [f"{lib}/{name}/site-packages" for name in pythons]
    assert str(raised.value) == f"pip_guard: expected one {lib}/python*/site-packages, found {found}"
