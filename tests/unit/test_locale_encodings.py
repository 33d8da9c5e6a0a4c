"""Every text file torchyard reads it reads as UTF-8, whatever the locale: each function below is run on a file
holding non-ASCII text under the C locale (locale_kit's fixture `c_locale`: an ASCII encoding, as a user's
LANG=en_US.ISO-8859-1, or LANG=C with PYTHONCOERCECLOCALE=0, gives). Read with the locale's encoding (`open()`
without one), each would fail or read other characters; the first test shows that the staging bites.
"""

from __future__ import annotations

import csv
import json
import mmap
from pathlib import Path

import pytest

from builder.image import venv_layers as vl
from builder.smoke import checks_cpu, checks_gpu, checks_profiler

FOLDER = "bibliothèque"  # a folder name that is not ASCII (UTF-8 on disk, as Linux paths are in practice)


def test_the_staged_locale_reads_utf8_text_without_an_encoding_as_ascii(tmp_path: Path, c_locale: None) -> None:
    path = tmp_path / "text"
    path.write_text("é", encoding="utf-8")
    with pytest.raises(UnicodeDecodeError), open(path) as handle:
        handle.read()


def test_os_release_with_non_ascii_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, c_locale: None) -> None:
    release = tmp_path / "os-release"
    text = 'PRETTY_NAME="Débian GNU/Linux 12 (bookworm) — édition"\nID=debian\nVERSION_ID="12"\n'
    release.write_text(text, encoding="utf-8")
    monkeypatch.setattr(checks_cpu, "OS_RELEASE", (str(release),))
    assert checks_cpu.os_name() == "debian12"


def test_os_release_falls_back_to_usr_lib_and_is_unknown_without_either(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """os-release(5): /etc/os-release first, /usr/lib/os-release only where /etc's is missing."""
    etc, usr = tmp_path / "etc-os-release", tmp_path / "usr-os-release"
    usr.write_text('ID=ubuntu\nVERSION_ID="24.04"\n')
    monkeypatch.setattr(checks_cpu, "OS_RELEASE", (str(etc), str(usr)))
    assert checks_cpu.os_name() == "ubuntu24.04"
    etc.write_text("ID=debian\n")  # no VERSION_ID in /etc's: /usr/lib's is not read for it
    assert checks_cpu.os_name() == "debian"
    etc.unlink()
    usr.unlink()
    assert checks_cpu.os_name() == "unknown"


def test_a_library_mapped_from_a_non_ascii_folder_is_found(tmp_path: Path, c_locale: None) -> None:
    """/proc/self/maps names every mapped file by its path: a library under a user's home may have any name."""
    library = tmp_path / FOLDER / "libtorchyard-probe.so.1"
    library.parent.mkdir()
    library.write_bytes(b"\0" * mmap.PAGESIZE)
    with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        found = checks_cpu._loaded("libtorchyard-probe")
        assert mapped[0] == 0
    assert found == str(library)


def test_the_driver_file_is_read_as_utf8(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, c_locale: None) -> None:
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  (builder@hôte)\n", encoding="utf-8")
    monkeypatch.setattr(checks_gpu, "DRIVER_FILE", str(version))
    assert checks_gpu.driver_version() == "550.54.14"


def test_a_trace_with_non_ascii_names_is_read(tmp_path: Path, c_locale: None) -> None:
    """A user's record_function labels and module names go into the profiler's Chrome trace as they are."""
    trace = tmp_path / "trace.json"
    events = [{"name": "étape d'entraînement", "cat": "user_annotation"}, {"name": "aten::mm", "cat": "cpu_op"}]
    trace.write_text(json.dumps({"traceEvents": events}, ensure_ascii=False), encoding="utf-8")
    assert checks_profiler.read_trace(str(trace)) == events


def test_a_record_naming_non_ascii_files_and_metadata_naming_a_non_ascii_name_are_read(
    tmp_path: Path, c_locale: None
) -> None:
    """Wheels may ship files whose names are not ASCII (RECORD is UTF-8 by the wheel specification)."""
    site = tmp_path / "site"
    info = site / "a-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Name: a\nVersion: 1.0\n", encoding="utf-8")
    with open(info / "RECORD", "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerow([f"a/{FOLDER}/données.txt", "", ""])
    odd = site / "Café_Tools-1.0.dist-info"  # not a name the specification allows, but one a wheel can carry
    odd.mkdir()
    (odd / "METADATA").write_text("Name: Café-Tools\nVersion: 1.0\n", encoding="utf-8")
    found = vl.read_dists(str(site))
    assert str(site / "a" / FOLDER / "données.txt") in found["a"].files
    assert sorted(found) == ["a", "café-tools"]


def test_a_pip_conf_with_non_ascii_text_gives_its_indexes(tmp_path: Path, c_locale: None) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("# miroir de l'équipe\n[global]\nindex-url = https://pypi.corp/simple\n", encoding="utf-8")
    assert vl.uv_env(str(conf)) == "export UV_DEFAULT_INDEX=https://pypi.corp/simple"
