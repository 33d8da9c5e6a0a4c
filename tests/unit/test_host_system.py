"""builder/host/system.py's RealSystem, the one seam between the host probe and the machine: what a command that
fails, is missing, may not run or hangs turns into, and which files it reads. Real commands and files in a temp
folder (the seam itself is what is tested here; every other host test replaces it with host_kit's recordings)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from builder.host.system import NOT_FOUND, Ran, RealSystem

SH = "/bin/sh"


def test_a_command_s_code_and_both_streams_are_kept() -> None:
    ran = RealSystem().run([SH, "-c", "printf 'out\\n'; printf 'err\\n' >&2; exit 3"])
    assert ran == Ran(3, "out\n", "err\n")


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    ran = RealSystem().run([SH, "-c", "printf 'GPU \\377\\n'"])
    assert ran == Ran(0, "GPU \ufffd\n", "")


def test_a_missing_command_is_the_shell_s_127_with_its_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "nvidia-smi")
    assert RealSystem().run([missing, "-L"]) == Ran(NOT_FOUND, "", f"{missing}: command not found")
    assert NOT_FOUND == 127


def test_a_folder_as_command_is_permission_denied_for_everyone(tmp_path: Path) -> None:
    # executing a directory is refused with EACCES even for root: the 126 path, whoever runs the tests
    assert RealSystem().run([str(tmp_path), "-L"]) == Ran(126, "", f"{tmp_path}: permission denied")


def test_a_command_that_hangs_is_124_after_its_timeout() -> None:
    ran = RealSystem().run([SH, "-c", "sleep 5"], timeout=0.3)
    assert ran == Ran(124, "", f"{SH} did not answer within 0 s")
    ran = RealSystem().run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=1.4)
    assert ran == Ran(124, "", f"{sys.executable} did not answer within 1 s")


def test_the_default_timeout_is_ten_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def record(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.update(kwargs)
        return subprocess.CompletedProcess(argv, 0, "late\n", "")

    monkeypatch.setattr(subprocess, "run", record)
    assert RealSystem().run([SH, "-c", "echo late"]) == Ran(0, "late\n", "")
    assert seen == {"capture_output": True, "text": True, "errors": "replace", "timeout": 10.0, "check": False}


def test_a_small_file_is_read_whole_and_a_large_one_up_to_the_limit(tmp_path: Path) -> None:
    small = tmp_path / "version"
    small.write_bytes(b"NVRM version: 535.54.03\n\xff")
    assert RealSystem().read(str(small)) == "NVRM version: 535.54.03\n\ufffd"
    big = tmp_path / "big"
    big.write_bytes(b"a" * ((1 << 20) + 5))
    assert RealSystem().read(str(big)) == "a" * (1 << 20)
    assert RealSystem().read(str(big), limit=3) == "aaa"


def test_what_cannot_be_read_is_none(tmp_path: Path) -> None:
    assert RealSystem().read(str(tmp_path / "missing")) is None


def test_a_fifo_or_a_folder_is_no_file_and_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "daemon.json"
    os.mkfifo(fifo)
    assert RealSystem().read(str(fifo)) is None  # a blocking open would hang here with no writer
    assert RealSystem().read(str(tmp_path)) is None  # a folder opens, and reading it used to raise


def test_a_file_handed_out_in_pieces_is_read_up_to_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "version"
    path.write_bytes(b"0123456789")
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 3)))  # as a /proc file may answer
    assert RealSystem().read(str(path)) == "0123456789"
    assert RealSystem().read(str(path), limit=7) == "0123456"


def test_glob_answers_sorted_paths(tmp_path: Path) -> None:
    for name in ("nvidia.yaml", "amd.yaml", "m.yaml", "notes.txt"):
        (tmp_path / name).write_text("")
    assert RealSystem().glob(str(tmp_path / "*.yaml")) == [
        str(tmp_path / n) for n in ("amd.yaml", "m.yaml", "nvidia.yaml")
    ]
    assert RealSystem().glob(str(tmp_path / "none-*")) == []


def test_machine_is_the_platform_s() -> None:
    assert RealSystem().machine() == platform.machine() != ""
