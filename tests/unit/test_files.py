"""builder/core/files.py with the exact line a user sees: what is read (a byte-order mark dropped), what is refused
and why (not a file, too large, not UTF-8), and where a report may be written (issue 24: mutation testing found
these messages and the report checks unheld by the unit tests that import the module)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from builder.core.errors import MatrixError, UsageError
from builder.core.files import check_writable, file_kind, read_bytes, read_text, write_report_file


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        (stat.S_IFDIR, "a directory"),
        (stat.S_IFIFO, "a named pipe"),
        (stat.S_IFCHR, "a character device"),
        (stat.S_IFBLK, "a block device"),
        (stat.S_IFSOCK, "a socket"),
        (stat.S_IFLNK, "not a regular file"),
    ],
)
def test_file_kind_names_each_kind(mode: int, kind: str) -> None:
    assert file_kind(mode | 0o644) == kind


def test_a_directory_a_pipe_a_device_and_a_missing_file_are_refused_by_name(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases = {
        tmp_path: "a directory, not a file",
        fifo: "a named pipe, not a file",
        Path("/dev/null"): "a character device, not a file",
        tmp_path / "missing.txt": "cannot read: No such file or directory",
    }
    for path, problem in cases.items():
        with pytest.raises(UsageError) as refused:
            read_bytes(path, "requirements")
        assert str(refused.value) == f"requirements {path}: {problem}"


def test_the_error_class_is_the_caller_s_and_an_unnamed_file_is_its_path(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match=rf"^{tmp_path}/m.toml: cannot read: No such file or directory$"):
        read_bytes(tmp_path / "m.toml", "", error=MatrixError)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 3)
    with pytest.raises(UsageError, match=rf"^{big}: 3 bytes, more than the 2 a file may have$"):
        read_bytes(big, "", limit=2)


def test_a_socket_is_not_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(UsageError, match=r": a socket, not a file$"):
            read_bytes(path, "x")


def test_text_drops_a_byte_order_mark_and_names_the_first_bad_byte(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_bytes(b"\xef\xbb\xbftorch==2.5.1\n")
    assert read_text(good, "requirements") == "torch==2.5.1\n"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"torch\n\xff==1\n")
    with pytest.raises(UsageError) as refused:
        read_text(bad, "requirements")
    assert str(refused.value) == f"requirements {bad}: not UTF-8 text (byte 6: 0xff)"
    with pytest.raises(MatrixError, match=rf"^{bad}: not UTF-8 text \(byte 6: 0xff\)$"):
        read_text(bad, "", error=MatrixError)


def test_a_report_may_replace_a_file_or_go_into_folders_yet_to_be_made(tmp_path: Path) -> None:
    existing = tmp_path / "r.json"
    existing.write_text("old")
    assert check_writable(existing, "--report") == existing
    deep = tmp_path / "a" / "b" / "r.json"
    assert check_writable(deep, "--report") == deep
    write_report_file(deep, "{}\n")
    assert deep.read_text() == "{}\n"


def test_a_report_over_a_folder_or_under_a_file_is_refused_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        check_writable(tmp_path, "--report")
    assert str(refused.value) == f"--report {tmp_path}: a directory, not a file to write a report to"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError) as under_a_file:
        check_writable(blocker / "sub" / "r.json", "--report")
    assert str(under_a_file.value) == f"--report {blocker}/sub/r.json: Not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: the access checks pass")
def test_a_report_in_a_folder_without_write_permission_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(UsageError, match=rf"^--report {locked}/r.json: folder {locked} is not writable$"):
        check_writable(locked / "r.json", "--report")
