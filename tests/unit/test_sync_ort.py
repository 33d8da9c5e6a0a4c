"""`matrix sync --onnxruntime VERSION` on the real matrix with onnxruntime-gpu 1.31.1 (or the CPU package's 1.32.0)
taken out, against PyPI's recorded pages: the GPU code is read from wheels built here (a provider that is a small
ELF64 with a fat binary, tests/unit/fatbin_kit.py) whose sha256 the served page lists, downloaded through the fake
network or found in --wheel-dir. The entry read back has the facts recorded from the real wheels; a file that is not
the one the index lists is refused; what cannot be read is not recorded, never guessed."""

from __future__ import annotations

import hashlib
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fatbin_kit import AARCH64, ELF, Entry, container, entry, provider, raw_container, sass
from http_kit import Answer, Net, Sent
from packaging.version import Version
from sync_kit import REAL, pypi, recorded, sync, without

from builder.core.kinds import Platform
from builder.matrix import load_matrix
from builder.matrix.model import OnnxRuntime
from builder.upstream.wheel_code import ORT_CUDA_PROVIDER, LibraryCode, read_wheel_code

X86 = "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl"
ARM = "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_34_aarch64.whl"
EXTRAS = (
    'Provides-Extra: cuda\nRequires-Dist: nvidia-cuda-nvrtc~=13.0; extra == "cuda"\n'
    'Requires-Dist: nvidia-cuda-runtime~=13.0; extra == "cuda"\n'
    'Provides-Extra: cudnn\nRequires-Dist: nvidia-cudnn-cu13~=9.0; extra == "cudnn"\n'
)
ARCH_SPECIFIC = 0x100000  # sm_90a: the entry flag cuobjdump names with an `a`


def _metadata(extras: str = EXTRAS) -> str:
    return f"Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.31.1\nRequires-Dist: numpy>=1.21.6\n{extras}\n"


def _specific(*archs: int) -> bytes:
    return raw_container(b"".join(entry(Entry(ELF, a), flags=ARCH_SPECIFIC) for a in archs))


def build(folder: Path, extras: str = EXTRAS, x86_needs: tuple[str, ...] = ("libcudart.so.13",)) -> dict[str, Path]:
    """The two cp312 wheels of 1.31.1 as small files: the SASS the real ones carry, the extras their METADATA names."""
    folder.mkdir(exist_ok=True)
    libraries = {
        X86: provider(container(*sass(75, 80, 86, 89)) + _specific(90, 120), "libcublas.so.13", *x86_needs),
        ARM: provider(container(*sass(89)) + _specific(90, 120, 121), "libcudart.so.13", machine=AARCH64),
    }
    for name, library in libraries.items():
        with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(ORT_CUDA_PROVIDER, library)
            archive.writestr("onnxruntime_gpu-1.31.1.dist-info/METADATA", _metadata(extras))
    return {name: folder / name for name in libraries}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def serving(wheels: dict[str, Path], bodies: dict[str, bytes] | None = None) -> tuple[Net, dict[str, Any]]:
    """PyPI with the page of onnxruntime-gpu listing the built wheels' sha256, and the wheels at their URLs."""
    page = recorded("onnxruntime-gpu")
    urls = {}
    for f in page["files"]:
        if f["filename"] in wheels:
            f["hashes"] = {"sha256": digest(wheels[f["filename"]])}
            urls[f["url"]] = (bodies or {}).get(f["filename"]) or wheels[f["filename"]].read_bytes()

    def files(sent: Sent) -> Answer | None:
        return Answer(200, urls[sent.url]) if sent.url in urls else None

    return pypi({"onnxruntime-gpu": page}).on(files), page


def without_1311() -> str:
    start = REAL.index('[[onnxruntime]]\npackage = "onnxruntime-gpu"\nversion = "1.31.1"')
    text = REAL[:start] + REAL[REAL.index('[[onnxruntime]]\npackage = "onnxruntime"\n') :]
    for arch in ("amd64", "arm64"):
        at = text.index(f"[sources.ort-wheel-1311-{arch}]\n")
        text = text[:at] + text[text.index("\n\n", at) + 2 :]
    return text


def entry_of(path: Path, package: str, version: str) -> OnnxRuntime:
    return next(o for o in load_matrix(path).onnxruntime if o.package == package and o.version == Version(version))


def real(package: str = "onnxruntime-gpu", version: str = "1.31.1") -> OnnxRuntime:
    return next(o for o in load_matrix(None).onnxruntime if o.package == package and o.version == Version(version))


def same_facts(new: OnnxRuntime, old: OnnxRuntime) -> None:
    """What was read from PyPI and the wheels; the note and the hand-added sources are a person's to add."""
    assert (new.python, new.platforms, new.cuda_major, new.cudnn_major) == (
        old.python,
        old.platforms,
        old.cuda_major,
        old.cudnn_major,
    )
    assert [(c.platform, c.sass, c.ptx, c.wheel) for c in new.code] == [
        (c.platform, c.sass, c.ptx, c.wheel) for c in old.code
    ]


def test_the_gpu_release_taken_out_is_read_back_from_its_downloaded_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = build(tmp_path / "built")
    net, page = serving(wheels)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    on_disk = []

    def read(wheel: Path) -> LibraryCode:
        on_disk.append(sorted(p.name for p in wheel.parent.iterdir()))
        return read_wheel_code(wheel)

    monkeypatch.setattr("builder.upstream.sync_ort.read_wheel_code", read)
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, "--onnxruntime", "1.31.1", "--write")
    assert code == 0
    assert on_disk == [[X86], [ARM]]  # one download on the disk at a time
    new = entry_of(path, "onnxruntime-gpu", "1.31.1")
    same_facts(new, real())
    assert [c.sha256 for c in new.code] == [digest(wheels[X86]), digest(wheels[ARM])]
    assert [c.sources for c in new.code] == [("ort-wheel-1311-amd64",), ("ort-wheel-1311-arm64",)]
    assert new.sources == ("pypi-onnxruntime-gpu",)
    gpu = [o.version for o in load_matrix(path).onnxruntime if o.package == "onnxruntime-gpu"]
    assert gpu == sorted(gpu) and gpu[-1] == Version("1.31.1")  # in its place, oldest first
    source = tomllib.loads(path.read_text())["sources"]["ort-wheel-1311-amd64"]
    assert source["url"] == next(f["url"] for f in page["files"] if f["filename"] == X86)
    assert (
        "holds SASS sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a; no PTX; it links libcublas.so.13 libcudart.so.13"
        in (source["title"])
    )
    assert len([s for s in net.sent if "files.pythonhosted.org" in s.url]) == 2
    assert list(scratch.iterdir()) == []  # the downloads went with the run


def test_wheels_already_downloaded_are_read_from_wheel_dir_and_nothing_is_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = build(tmp_path / "wheels")
    net, _ = serving(wheels)
    args = ("--onnxruntime", "1.31.1", "--wheel-dir", str(tmp_path / "wheels"))
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, *args)
    out = capsys.readouterr().out
    assert code == 0 and path.read_text() == without_1311()
    assert [s.url for s in net.sent if "files.pythonhosted.org" in s.url] == []
    assert '[onnxruntime.amd64]\nsass = ["7.5", "8.0", "8.6", "8.9", "9.0a", "12.0a"]\nptx = []\n' in out
    assert "# CUDA and cuDNN majors: onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl METADATA" in out
    assert out.endswith(f"# matrix check: ok with these entries in {path} (--write inserts them)\n")


def test_a_download_that_is_not_the_listed_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    net, _ = serving(build(tmp_path / "built"), bodies={X86: b"PK\x05\x06 something else"})
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, "--onnxruntime", "1.31.1", "--write")
    err = capsys.readouterr().err
    assert code == 5 and path.read_text() == without_1311()
    assert "the download's sha256 is" in err and err.count("\n") == 1


def test_a_wheel_the_file_host_does_not_serve_is_upstream_failing_not_a_missing_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, page = serving(build(tmp_path / "built"))  # the page lists the wheels, the file host serves nothing
    code, _ = sync(without_1311(), pypi({"onnxruntime-gpu": page}), tmp_path, monkeypatch, "--onnxruntime", "1.31.1")
    err = capsys.readouterr().err
    assert code == 5 and err.startswith("torchyard: error: https://files.pythonhosted.org/") and "HTTP 404" in err


def test_a_wheel_in_wheel_dir_that_is_not_the_listed_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = build(tmp_path / "wheels")
    net, _ = serving(wheels)
    wheels[ARM].write_bytes(b"not the wheel PyPI lists")
    args = ("--onnxruntime", "1.31.1", "--wheel-dir", str(tmp_path / "wheels"))
    code, _ = sync(without_1311(), net, tmp_path, monkeypatch, *args)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"torchyard: error: {wheels[ARM]}: sha256 ") and "not that wheel" in err


def test_a_platform_whose_wheel_is_not_at_hand_is_not_recorded_and_says_where_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = build(tmp_path / "wheels")
    net, page = serving(wheels)
    wheels[ARM].unlink()
    args = ("--onnxruntime", "1.31.1", "--wheel-dir", str(tmp_path / "wheels"), "--write")
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, *args)
    assert code == 0
    new = entry_of(path, "onnxruntime-gpu", "1.31.1")
    assert new.platforms == (Platform.AMD64, Platform.ARM64) and [c.platform for c in new.code] == [Platform.AMD64]
    text = " ".join(line.removeprefix("# ") for line in path.read_text().splitlines() if line.startswith("# "))
    url = next(f["url"] for f in page["files"] if f["filename"] == ARM)
    assert f"Not recorded: the GPU code of its arm64 wheels: {ARM} is not in {tmp_path / 'wheels'}: download {url}" in (
        text
    )


def test_without_extras_the_majors_are_the_libraries_its_provider_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheels = build(tmp_path / "wheels", extras="", x86_needs=("libcudart.so.12", "libcudnn.so.9"))
    net, _ = serving(wheels)
    args = ("--onnxruntime", "1.31.1", "--wheel-dir", str(tmp_path / "wheels"), "--write")
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, *args)
    assert code == 0
    new = entry_of(path, "onnxruntime-gpu", "1.31.1")
    assert (new.cuda_major, new.cudnn_major) == (12, 9)
    assert new.note == (
        "its METADATA has no cuda/cudnn extras: the majors are the libraries its CUDA provider links "
        "(libcudart.so.12, libcudnn.so.9)"
    )


@pytest.mark.parametrize(
    "extras",
    [
        "",
        # a requirement every install has is not the cuda extra; the cudnn extra alone does not name CUDA's major
        'Requires-Dist: nvidia-cuda-runtime~=12.0; sys_platform == "linux"\n'
        'Provides-Extra: cudnn\nRequires-Dist: nvidia-cudnn-cu13~=9.0; extra == "cudnn"\n',
    ],
    ids=["no-extras", "no-cuda-extra"],
)
def test_a_major_neither_the_metadata_nor_the_libraries_name_is_refused(
    extras: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheels = build(tmp_path / "wheels", extras=extras)  # links libcudart.so.13, no cuDNN
    net, _ = serving(wheels)
    args = ("--onnxruntime", "1.31.1", "--wheel-dir", str(tmp_path / "wheels"), "--write")
    code, path = sync(without_1311(), net, tmp_path, monkeypatch, *args)
    assert code == 1 and path.read_text() == without_1311()
    assert "onnxruntime-gpu 1.31.1: its CUDA or cuDNN major is not recorded" in capsys.readouterr().err


def test_the_cpu_package_taken_out_comes_back_with_the_same_facts_and_nothing_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = without(
        REAL,
        '[[onnxruntime]]\npackage = "onnxruntime"\nversion = "1.32.0"\npython = ["3.11", "3.12", "3.13", "3.14"]\n'
        'platforms = ["amd64", "arm64"]\nsource = "pypi-onnxruntime"\n\n',
    )
    net = pypi()
    args = ("--onnxruntime", "1.32.0", "--package", "onnxruntime", "--write")
    code, path = sync(older, net, tmp_path, monkeypatch, *args)
    assert code == 0
    assert entry_of(path, "onnxruntime", "1.32.0") == real("onnxruntime", "1.32.0")
    assert [s.url for s in net.sent] == ["https://pypi.org/simple/onnxruntime/"]


def test_the_pythons_are_those_every_platform_has_wheels_for_and_the_rest_is_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = recorded("onnxruntime")
    page["files"] = [f for f in page["files"] if not f["filename"].startswith("onnxruntime-1.32.0-cp314-cp314-")
                     or "x86_64" in f["filename"]]  # fmt: skip
    older = without(REAL, 'version = "1.32.0"\n', 'version = "1.31.0"\n')
    args = ("--onnxruntime", "1.32.0", "--package", "onnxruntime", "--write")
    code, path = sync(older, pypi({"onnxruntime": page}), tmp_path, monkeypatch, *args)
    assert code == 0
    new = entry_of(path, "onnxruntime", "1.32.0")
    assert new.python == ("3.11", "3.12", "3.13") and new.note == "amd64 also has wheels for Python 3.14"


@pytest.mark.parametrize(
    ("version", "code", "said"),
    [
        ("1.31.1", 2, "--onnxruntime 1.31.1: the matrix has onnxruntime-gpu 1.31.1 already"),
        ("9.9.9", 1, "https://pypi.org/simple/onnxruntime-gpu/ lists no onnxruntime-gpu 9.9.9 Linux wheels (newest: "),
    ],
)
def test_a_release_recorded_or_not_on_pypi_is_refused(
    version: str,
    code: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    found, _ = sync(REAL, pypi(), tmp_path, monkeypatch, "--onnxruntime", version)
    assert found == code and capsys.readouterr().err.startswith(f"torchyard: error: {said}")
