"""Read one member of a remote wheel (its .dist-info/METADATA) with HTTP range requests, as pip's lazy wheel
does: the zip's end-of-central-directory record from the file's tail, the central directory entry of the
member (at the tail of the directory in new wheels, at its head in old ones, else the whole directory),
then the member's local header and compressed bytes. A 500 MB torch wheel costs about 100 KB.

Every range is an immutable cache entry (the file URL names its content): a rerun reads nothing.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from builder.net.cache import CacheKind
from builder.net.http import Http, TooLarge

TAIL = 64 * 1024  # EOCD + the last entries of the central directory (new wheels put dist-info last)
HEAD = 32 * 1024  # the first entries of the central directory (old wheels put dist-info first)
WHOLE = 16 * 1024 * 1024  # a server that ignores Range: a whole file up to this size is still usable
_EOCD, _EOCD64, _LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"
_CENTRAL, _LOCAL = b"PK\x01\x02", b"PK\x03\x04"
_METADATA = re.compile(r"^[^/]+\.dist-info/METADATA$")
_TOTAL = re.compile(r"/(\d+)\s*$")


class WheelError(ValueError):
    """The wheel cannot be read this way: truncated, damaged, no METADATA, or no range support."""


@dataclass(frozen=True)
class _Entry:
    name: str
    method: int
    crc: int
    compressed: int
    size: int
    offset: int  # of the local header


@dataclass
class _Remote:
    http: Http
    url: str
    total: int = 0
    reads: int = 0
    whole: bytes | None = None  # the server ignored Range and sent it all
    last: bytes = b""  # the tail already read: a small wheel's member often lies in it

    def tail(self, length: int) -> bytes:
        reply = self.http.get(self.url, headers={"Range": f"bytes=-{length}"}, cache=CacheKind.IMMUTABLE, limit=WHOLE)
        self.reads += 1
        if reply.status == 200:
            self.whole, self.total = reply.body, len(reply.body)
            return reply.body[-length:]
        if reply.status != 206:
            raise WheelError(f"{self.url} answered HTTP {reply.status} to a range request")
        found = _TOTAL.search(reply.header("content-range") or "")
        if found is None:
            raise WheelError(f"{self.url} answered a range without its total size (Content-Range)")
        self.total = int(found[1])
        self.last = reply.body
        return reply.body

    def read(self, start: int, length: int) -> bytes:
        if start < 0 or length <= 0 or start + length > self.total:
            raise WheelError(f"{self.url}: the zip points outside the file (truncated or damaged)")
        if self.whole is not None:
            return self.whole[start : start + length]
        tail_start = self.total - len(self.last)
        if start >= tail_start:
            return self.last[start - tail_start : start - tail_start + length]
        end = start + length - 1
        span = {"Range": f"bytes={start}-{end}"}
        reply = self.http.get(self.url, headers=span, cache=CacheKind.IMMUTABLE, limit=WHOLE)
        self.reads += 1
        if reply.status == 200 and len(reply.body) == self.total:
            self.whole = reply.body
            return reply.body[start : start + length]
        if reply.status != 206 or len(reply.body) != length:
            got = f"HTTP {reply.status} with {len(reply.body)} bytes"
            raise WheelError(f"{self.url} answered {got} to a range of {length}")
        return reply.body


def read_metadata(http: Http, url: str) -> str:
    """The text of the wheel's .dist-info/METADATA."""
    return read_member(http, url, _METADATA)


def read_member(http: Http, url: str, name: re.Pattern[str]) -> str:
    """The text of the one member whose path matches `name` (dist-info members are found fastest: they
    lie at the head or the tail of the central directory)."""
    remote = _Remote(http, url)
    try:
        tail = remote.tail(TAIL)
        entry = _find_entry(remote, tail, name)
        return _member(remote, entry)
    except TooLarge:
        raise WheelError(f"{url}: the server ignores HTTP range requests (the whole wheel would be read)") from None


def member_checksum(http: Http, url: str, name: re.Pattern[str]) -> tuple[int, int]:
    """(CRC-32, size) of the one member whose path matches `name`, from the central directory alone: two wheels
    carry the same library when both agree (the GPU code read from one wheel of a release holds for the rest)."""
    remote = _Remote(http, url)
    try:
        entry = _find_entry(remote, remote.tail(TAIL), name)
    except TooLarge:
        raise WheelError(f"{url}: the server ignores HTTP range requests (the whole wheel would be read)") from None
    return entry.crc, entry.size


def _find_entry(remote: _Remote, tail: bytes, name: re.Pattern[str]) -> _Entry:
    tail_start = remote.total - len(tail)
    cd_offset, cd_size = _directory(remote, tail, tail_start)
    if cd_offset + cd_size > remote.total:
        raise WheelError(f"{remote.url}: the central directory lies past the end of the file (truncated)")
    if cd_offset >= tail_start:  # the whole directory came with the tail
        directory = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
        return _scan(directory, name) or _search(_entries(directory, remote.url), remote, name)
    found = _scan(tail[: cd_offset + cd_size - tail_start], name)
    if found is not None:
        return found
    head = remote.read(cd_offset, min(HEAD, cd_size))
    found = next((e for e in _entries(head, remote.url, partial=True) if name.match(e.name)), None)
    if found is not None:
        return found
    return _search(_entries(remote.read(cd_offset, cd_size), remote.url), remote, name)


def _directory(remote: _Remote, tail: bytes, tail_start: int) -> tuple[int, int]:
    """(offset, size) of the central directory, from the EOCD record (zip64 where it says so)."""
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise WheelError(f"{remote.url}: no end-of-central-directory record (not a zip, or truncated)")
    _, _, _, _, entries, size, offset, _ = struct.unpack("<IHHHHIIH", tail[at : at + 22])
    if offset != 0xFFFFFFFF and size != 0xFFFFFFFF and entries != 0xFFFF:
        return offset, size
    locator = tail[at - 20 : at] if at >= 20 else b""
    if not locator.startswith(_LOCATOR64):
        raise WheelError(f"{remote.url}: a zip64 archive without its zip64 locator")
    (record_at,) = struct.unpack("<Q", locator[8:16])
    record = tail[record_at - tail_start : record_at - tail_start + 56] if record_at >= tail_start else b""
    if len(record) < 56:
        record = remote.read(record_at, 56)
    if not record.startswith(_EOCD64):
        raise WheelError(f"{remote.url}: a damaged zip64 end-of-central-directory record")
    size64, offset64 = struct.unpack("<QQ", record[40:56])
    return offset64, size64


def _entries(data: bytes, url: str, *, partial: bool = False) -> Iterator[_Entry]:
    """Central directory entries from the start of `data`; with `partial`, the last one may be cut off."""
    at = 0
    while at + 46 <= len(data):
        if data[at : at + 4] != _CENTRAL:
            if partial:
                return
            raise WheelError(f"{url}: a damaged central directory")
        entry, at = _entry(data, at)
        if entry is None:
            return
        yield entry


def _entry(data: bytes, at: int) -> tuple[_Entry | None, int]:
    fields = struct.unpack("<4sHHHHHHIIIHHHHHII", data[at : at + 46])
    method, crc, compressed, size = fields[4], fields[7], fields[8], fields[9]
    name_len, extra_len, comment_len, offset = fields[10], fields[11], fields[12], fields[16]
    end = at + 46 + name_len + extra_len + comment_len
    if end > len(data):
        return None, at
    name = data[at + 46 : at + 46 + name_len].decode("utf-8", errors="replace")
    extra = data[at + 46 + name_len : at + 46 + name_len + extra_len]
    size, compressed, offset = _zip64(extra, size, compressed, offset)
    return _Entry(name, method, crc, compressed, size, offset), end


def _zip64(extra: bytes, size: int, compressed: int, offset: int) -> tuple[int, int, int]:
    """Sizes and offset from the zip64 extra field, for the ones the entry marks 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack("<HH", extra[at : at + 4])
        if kind == 0x0001:
            values = list(struct.unpack(f"<{length // 8}Q", extra[at + 4 : at + 4 + length - length % 8]))
            if size == 0xFFFFFFFF and values:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
            break
        at += 4 + length
    return size, compressed, offset


def _scan(data: bytes, name: re.Pattern[str]) -> _Entry | None:
    """The member's entry among the directory entries in `data`, which starts mid-entry: find where the
    name's literal end occurs and parse the entry whose signature comes before it (a false signature
    inside a name fails to parse or names something else)."""
    literal = _literal(name)
    if literal is not None:
        return _scan_for(data, name, literal)
    at = data.find(_CENTRAL)
    while at >= 0:
        try:
            entry, _ = _entry(data, at)
        except struct.error:
            entry = None
        if entry is not None and name.match(entry.name):
            return entry
        at = data.find(_CENTRAL, at + 4)
    return None


def _literal(name: re.Pattern[str]) -> bytes | None:
    """The fixed text a member name pattern ends with (".dist-info/METADATA", "torch/version.py")."""
    found = re.search(r"((?:[A-Za-z0-9_/-]|\\\.)+)\$$", name.pattern)
    return found[1].replace("\\.", ".").encode() if found and len(found[1]) > 6 else None


def _scan_for(data: bytes, name: re.Pattern[str], literal: bytes) -> _Entry | None:
    at = data.find(literal)
    while at >= 0:
        start = data.rfind(_CENTRAL, max(0, at - 46 - 1024), at)
        while start >= 0:
            try:
                entry, _ = _entry(data, start)
            except struct.error:
                entry = None
            if entry is not None and name.match(entry.name):
                return entry
            start = data.rfind(_CENTRAL, max(0, at - 46 - 1024), start)
        at = data.find(literal, at + 1)
    return None


def _search(entries: Iterable[_Entry], remote: _Remote, name: re.Pattern[str]) -> _Entry:
    found = [e for e in entries if name.match(e.name)]
    if not found:
        what = ".dist-info/METADATA" if name is _METADATA else name.pattern
        raise WheelError(f"{remote.url}: no {what} in the wheel")
    return found[0]


def _member(remote: _Remote, entry: _Entry) -> str:
    guess = 30 + len(entry.name.encode()) + 64 + entry.compressed  # local extra fields are short
    data = remote.read(entry.offset, min(guess, remote.total - entry.offset))
    if not data.startswith(_LOCAL) or len(data) < 30:
        raise WheelError(f"{remote.url}: no local header where the directory points (damaged)")
    name_len, extra_len = struct.unpack("<HH", data[26:30])
    start = 30 + name_len + extra_len
    if start + entry.compressed > len(data):
        data += remote.read(entry.offset + len(data), start + entry.compressed - len(data))
    raw = data[start : start + entry.compressed]
    if entry.method == 8:
        try:
            raw = zlib.decompress(raw, -15)
        except zlib.error:
            raise WheelError(f"{remote.url}: {entry.name} does not inflate (damaged)") from None
    elif entry.method != 0:
        raise WheelError(f"{remote.url}: {entry.name} is compressed with method {entry.method}, not deflate")
    if zlib.crc32(raw) != entry.crc or len(raw) != entry.size:
        raise WheelError(f"{remote.url}: {entry.name} fails its CRC check (damaged)")
    return raw.decode("utf-8", errors="replace")
