"""`matrix sync --nvidia-wheel PACKAGE` on the real matrix with a release taken out, against PyPI's recorded pages:
the newest NCCL comes back exactly as recorded, a move to a new glibc floor becomes a new entry with its note, a
machine without a wheel is named and never given a tag, cuda-toolkit is refused with what to read, and every other
mix of flags is one line and exit 2."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from http_kit import Net
from packaging.tags import parse_tag
from packaging.version import Version
from sync_kit import REAL, pypi, recorded, sync, without

from builder.matrix import load_matrix
from builder.upstream.index import IndexFile
from builder.upstream.sync_wheels import read_tags
from builder.upstream.wheels import Wheel

NCCL_232 = (
    '[[nvidia_wheel]]\npackage = "nvidia-nccl-cu13"\nversions = ["2.32.3", "2.32.6"]\n'
    'platform_tags = ["manylinux_2_27_x86_64", "manylinux_2_27_aarch64"]\n'
    'note = "NCCL\'s wheels moved from manylinux_2_18 (2.31.2) to manylinux_2_27 with 2.32.3"\n'
    'source = "pypi-nvidia-wheels"\n\n'
)
CUDNN = '"9.24.0.43", "9.26.0.51", "9.28.1.4"]'


def entries(path: Path, package: str) -> list[dict[str, Any]]:
    return [w for w in tomllib.loads(path.read_text())["nvidia_wheel"] if w["package"] == package]


def test_the_newest_nccl_taken_out_comes_back_exactly_as_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = without(REAL, 'versions = ["2.32.3", "2.32.6"]', 'versions = ["2.32.3"]')
    code, path = sync(older, pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13", "--write")
    assert code == 0
    assert capsys.readouterr().out == f"{path}: nvidia-nccl-cu13 2.32.6 added; review the diff\n"
    assert path.read_text() == REAL


def test_without_write_the_entry_is_printed_and_the_file_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = without(REAL, 'versions = ["2.32.3", "2.32.6"]', 'versions = ["2.32.3"]')
    code, path = sync(older, pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13")
    out = capsys.readouterr().out
    assert code == 0 and path.read_text() == older
    assert out.startswith("# matrix sync: 2.32.6 joins this entry: the same tags (https://pypi.org/simple/nvidia-nccl")
    assert '\nversions = ["2.32.3", "2.32.6"]\n' in out
    assert out.endswith(f"# matrix check: ok with these entries in {path} (--write inserts them)\n")


def test_a_move_to_a_new_floor_is_a_new_entry_and_the_old_floor_takes_its_last_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, path = sync(
        without(REAL, NCCL_232), pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13", "--write"
    )
    assert code == 0
    *_, at_2_18, at_2_27 = entries(path, "nvidia-nccl-cu13")
    assert at_2_18["versions"] == ["2.28.9", "2.29.7", "2.30.7", "2.31.2"]  # 2.31.2's wheels: manylinux_2_18
    assert at_2_27 == {
        "package": "nvidia-nccl-cu13",
        "versions": ["2.32.3", "2.32.6"],
        "platform_tags": ["manylinux_2_27_x86_64", "manylinux_2_27_aarch64"],
        "note": "nvidia-nccl-cu13's wheels moved from manylinux_2_18 (2.31.2) to manylinux_2_27 with 2.32.3",
        "source": "pypi-nvidia-wheels",
    }
    assert "# matrix sync: the tags of nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_x86_64.whl," in path.read_text()


def test_every_cudnn_newer_than_the_newest_recorded_is_added_dev_builds_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = without(REAL, CUDNN, '"9.24.0.43", "9.26.0.51"]')
    code, path = sync(older, pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-cudnn-cu13", "--write")
    assert code == 0
    # what `matrix outdated` lists as missing: the patch 9.26.1.1 and the releases since, in order
    added = '"9.24.0.43", "9.26.0.51", "9.26.1.1", "9.27.0.42", "9.28.0.42", "9.28.1.4"]'
    assert path.read_text() == without(REAL, CUDNN, added)


def test_a_machine_without_a_wheel_is_named_and_given_no_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = recorded("nvidia-nccl-cu13")
    page["files"] = [
        f for f in page["files"] if f["filename"] != "nvidia_nccl_cu13-2.32.6-py3-none-manylinux_2_27_aarch64.whl"
    ]
    older = without(REAL, 'versions = ["2.32.3", "2.32.6"]', 'versions = ["2.32.3"]')
    net = pypi({"nvidia-nccl-cu13": page})
    code, path = sync(older, net, tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13", "--write")
    assert code == 0
    new = entries(path, "nvidia-nccl-cu13")[-1]
    assert (new["versions"], new["platform_tags"]) == (["2.32.6"], ["manylinux_2_27_x86_64"])
    assert new["note"].endswith("; no aarch64 wheel on PyPI for 2.32.6")
    (loaded,) = [w for w in load_matrix(path).nvidia_wheels if Version("2.32.6") in w.versions]
    assert loaded.tag_for("aarch64") is None  # not recorded, so the rule glibc-os counts no floor there


def test_nothing_newer_says_so_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, path = sync(REAL, pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13", "--write")
    assert code == 0 and path.read_text() == REAL
    assert capsys.readouterr().out == (
        "# nvidia-nccl-cu13: nothing on https://pypi.org/simple/nvidia-nccl-cu13/ newer than 2.32.6, the newest "
        "matrix.toml records\n"
    )


def _wheel(filename: str) -> Wheel:
    tags = frozenset(t for part in [filename[:-4].split("-", 2)[2]] for t in parse_tag(part))
    return Wheel(IndexFile(filename, f"https://files/{filename}", None, None, None, False, None), Version("1"), tags)


def test_a_compressed_tag_set_reads_as_its_lowest_floor_in_pep_600_form() -> None:
    both = _wheel("n-1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    legacy = _wheel("n-1-py3-none-manylinux2014_aarch64.whl")
    two = _wheel("n-1-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
    assert read_tags(Version("1"), [both, legacy]).tags == ("manylinux_2_17_x86_64", "manylinux_2_17_aarch64")
    assert read_tags(Version("1"), [both, legacy]).legacy == ("manylinux2014_aarch64",)
    assert read_tags(Version("1"), [two]).tags == ("manylinux_2_27_x86_64",)


def test_cuda_toolkit_is_listed_and_refused_with_what_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    older = without(REAL, '"13.4.3", "13.5.0"]', '"13.4.3"]')
    code, path = sync(older, pypi(), tmp_path, monkeypatch, "--nvidia-wheel", "cuda-toolkit", "--write")
    captured = capsys.readouterr()
    assert code == 2 and path.read_text() == older
    assert captured.out == "# cuda-toolkit 13.5.0: newer than 13.4.3, platform tags not read\n"
    assert captured.err.startswith(
        "torchyard: error: --nvidia-wheel cuda-toolkit: platform tags not read: read the components (via "
        "nvidia-cusolver): its wheel is py2.py3-none-any"
    )
    assert captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "matrix sync takes exactly one of --torch, --nvidia-wheel, --onnxruntime"),
        (
            ("--torch", "2.9.0", "--nvidia-wheel", "nvidia-nccl-cu13"),
            "matrix sync takes exactly one of --torch, --nvidia-wheel, --onnxruntime (given: --torch and "
            "--nvidia-wheel)",
        ),
        (("--nvidia-wheel", "nvidia-nccl-cu13", "--wheel-dir", "."), "--package and --wheel-dir go with --onnxruntime"),
        (("--onnxruntime", "one"), "--onnxruntime: "),
        (("--nvidia-wheel", "nvidia-nccl-cu12"), "--nvidia-wheel nvidia-nccl-cu12: sync reads nvidia-cudnn-cu13"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(
    args: tuple[str, ...],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _ = sync(REAL, Net(), tmp_path, monkeypatch, *args)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"torchyard: error: {said}") and err.count("\n") == 1


def test_write_refuses_a_file_it_cannot_write_before_reading_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("builder.cli.sync_cmd.os.access", lambda path, mode: False)
    net = pypi()
    code, path = sync(REAL, net, tmp_path, monkeypatch, "--nvidia-wheel", "nvidia-nccl-cu13", "--write")
    assert code == 2 and net.sent == []
    assert capsys.readouterr().err == (
        f"torchyard: error: {path} is not writable: sync into a matrix of your own (--matrix FILE)\n"
    )
