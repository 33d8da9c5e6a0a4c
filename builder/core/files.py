"""Reading files a user, a pull request or CI hands torchyard (matrix files, requirements, expectations, the
parts of an extension folder): regular files only, checked before they are opened and opened without blocking
(a named pipe or /dev/zero never hangs a command), a size limit, UTF-8 with the offset of the first bad byte,
a byte-order mark dropped. Every problem is one error naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from builder.core.errors import TorchyardError, UsageError

TEXT_LIMIT = 4 << 20  # 4 MiB: matrix.toml is about 90 KB, a requirements file a few KB


def file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a named pipe",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a regular file")


def read_bytes(
    path: str | Path, what: str, *, limit: int = TEXT_LIMIT, error: type[TorchyardError] = UsageError
) -> bytes:
    where = f"{what} {path}" if what else str(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{where}: {file_kind(info.st_mode)}, not a file")
    if info.st_size > limit:
        raise error(f"{where}: {info.st_size} bytes, more than the {limit} a {what or 'file'} may have")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped between stat and open
                raise error(f"{where}: not a regular file")
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{where}: cannot read: {exc.strerror}") from None
    if len(data) > limit:
        raise error(f"{where}: more than the {limit} bytes a {what or 'file'} may have")
    return data


def read_text(path: str | Path, what: str, *, limit: int = TEXT_LIMIT, error: type[TorchyardError] = UsageError) -> str:
    data = read_bytes(path, what, limit=limit, error=error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = f"{what} {path}" if what else str(path)
        raise error(f"{where}: not UTF-8 text (byte {exc.start}: {data[exc.start]:#04x})") from None


def check_writable(path: str | Path, flag: str) -> Path:
    """A file a command will write when it is done (a report): refused before any work starts, so an hour's
    build never ends in "permission denied". An existing regular file is replaced, nothing else is; missing
    folders are made when it is written (as `-o` makes its own) under the nearest folder that exists."""
    target = Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        _check_folder(target, flag)
        return target
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{flag} {path}: {file_kind(info.st_mode)}, not a file to write a report to")
    if not os.access(target, os.W_OK):
        raise UsageError(f"{flag} {path}: not writable")
    return target


def _check_folder(target: Path, flag: str) -> None:
    folder = target.absolute().parent
    while True:
        try:
            info = os.stat(folder)
            break
        except FileNotFoundError:
            folder = folder.parent
        except OSError as exc:
            raise UsageError(f"{flag} {target}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{flag} {target}: {folder} is {file_kind(info.st_mode)}, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {target}: folder {folder} is not writable")


def write_file(path: Path, data: str | bytes, *, shown: Path | None = None) -> None:
    """Write a file torchyard makes; a full disk, a quota or a read-only folder is one error naming the file
    (`shown`: the name the user knows, for a file written in a staging folder first): the OSError of a failed
    write() carries no file name, so "No space left on device" alone would not say where."""
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    except OSError as exc:
        raise UsageError(f"{shown or path}: cannot write: {exc.strerror or exc}") from None


def write_report_file(path: Path, text: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path.parent}: cannot make the folder: {exc.strerror or exc}") from None
    write_file(path, text)
