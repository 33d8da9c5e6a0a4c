"""builder/core/files.py with the exact line a user sees: what is read (a byte-order mark dropped), what is refused
and why (not a file, too large, not UTF-8), and where a report may be written (issue 24: mutation testing found
these messages and the report checks unheld by the unit tests that import the module)."""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def test_text_keeps_the_caller_s_name_limit_and_error_class(tmp_path: Path) -> None:
    big = tmp_path / "r.txt"
    big.write_text("abc")
    with pytest.raises(UsageError, match=rf"^requirements {big}: 3 bytes, more than the 2 a requirements may have$"):
        read_text(big, "requirements", limit=2)
    with pytest.raises(MatrixError, match=rf"^matrix {tmp_path}/m.toml: cannot read: No such file or directory$"):
        read_text(tmp_path / "m.toml", "matrix", error=MatrixError)


def _stat_says(monkeypatch: pytest.MonkeyPatch, path: Path, answer: Callable[[], os.stat_result]) -> None:
    """os.stat answers `answer()` for `path` (what a file looked like just before it changed), the truth for
    every other path."""
    real_stat = os.stat

    def fake(p: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        return answer() if Path(p) == path else real_stat(p, *args, **kwargs)

    monkeypatch.setattr(os, "stat", fake)


def test_a_pipe_swapped_in_after_the_check_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    _stat_says(monkeypatch, fifo, lambda: regular)
    refused: list[str] = []

    def read() -> None:
        try:
            read_bytes(fifo, "requirements")
        except UsageError as exc:
            refused.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    waited = reader.is_alive()
    if waited:  # opened blocking: it waits for a writer; one comes and goes so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(5)
    assert not waited, "read_bytes waited for a writer on a named pipe"
    assert refused == [f"requirements {fifo}: not a regular file"]


def test_a_file_removed_between_the_check_and_the_open_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone.txt"
    regular = os.stat(__file__)
    _stat_says(monkeypatch, gone, lambda: regular)
    with pytest.raises(UsageError) as refused:
        read_bytes(gone, "requirements")
    assert str(refused.value) == f"requirements {gone}: cannot read: No such file or directory"


class _Endless:
    """A regular file that never ends (a /proc file's stat size is 0): read() without a size would never return."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __enter__(self) -> _Endless:
        return self

    def __exit__(self, *exc: object) -> None:
        self._real.close()

    def fileno(self) -> int:
        return int(self._real.fileno())

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("read to the end of a file that never ends")
        return b"x" * size


def test_a_file_that_never_ends_is_read_only_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "status"  # stat size 0, like /proc/self/status
    empty.write_bytes(b"")
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: _Endless(real_fdopen(fd, *a, **k)))
    with pytest.raises(UsageError) as refused:
        read_bytes(empty, "requirements", limit=8)
    assert str(refused.value) == f"requirements {empty}: more than the 8 bytes a requirements may have"


def _access_denies(monkeypatch: pytest.MonkeyPatch, path: Path, denied: int) -> None:
    """os.access as for a user without the `denied` permission bits on `path` (the tests may run as root, who
    has them all)."""
    real_access = os.access

    def fake(p: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        if Path(p) == path and mode & denied:
            return False
        return real_access(p, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", fake)


def test_a_report_in_a_folder_one_may_write_but_not_enter_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    _access_denies(monkeypatch, folder, os.X_OK)
    with pytest.raises(UsageError) as refused:
        check_writable(folder / "sub" / "r.json", "--report")
    assert str(refused.value) == f"--report {folder}/sub/r.json: folder {folder} is not writable"


def test_a_read_only_report_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "r.json"
    report.write_text("old")
    _access_denies(monkeypatch, report, os.W_OK)
    with pytest.raises(UsageError) as refused:
        check_writable(report, "-o")
    assert str(refused.value) == f"-o {report}: not writable"


def test_a_report_s_folder_that_turned_into_a_file_or_cannot_be_looked_at_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    regular = os.stat(__file__)
    _stat_says(monkeypatch, folder, lambda: regular)
    with pytest.raises(UsageError) as not_a_folder:
        check_writable(folder / "r.json", "--report")
    assert str(not_a_folder.value) == f"--report {folder}/r.json: {folder} is not a regular file, not a folder"

    def denied() -> os.stat_result:
        raise PermissionError(13, "Permission denied")

    _stat_says(monkeypatch, folder, denied)
    with pytest.raises(UsageError) as cannot_look:
        check_writable(folder / "r.json", "--report")
    assert str(cannot_look.value) == f"--report {folder}/r.json: Permission denied"


def test_a_report_goes_into_a_folder_that_exists_or_names_the_folder_it_cannot_make(tmp_path: Path) -> None:
    write_report_file(tmp_path / "r.json", "{}\n")
    assert (tmp_path / "r.json").read_text() == "{}\n"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError) as refused:
        write_report_file(blocker / "sub" / "r.json", "{}\n")
    assert str(refused.value) == f"{blocker}/sub: cannot make the folder: Not a directory"
