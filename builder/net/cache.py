"""An on-disk cache of upstream answers (`--offline-cache DIR`), so that a rerun costs nothing.

Two kinds of answers: immutable ones (a byte range of a wheel whose URL names its content, a blob
or manifest by digest) are kept for good; mutable ones (an index page, a tag) are served while
younger than `max_age` seconds. Only 200, 206 and 404 answers are stored; credentials and tokens
never are (the client does not cache the token service). An entry whose body does not match its
recorded size and CRC-32 is a miss (damage, not tampering: the cache is the user's own directory).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class CacheKind(StrEnum):
    IMMUTABLE = "immutable"
    MUTABLE = "mutable"


@dataclass(frozen=True)
class Stored:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str


_KEPT_HEADERS = ("content-type", "content-range", "content-length", "docker-content-digest", "etag")


class DiskCache:
    def __init__(self, directory: Path, *, max_age: float = 86400.0, now: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self.max_age = max_age
        self._now = now

    def get(self, key: str, kind: CacheKind) -> Stored | None:
        meta_path, body_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text())
            body = body_path.read_bytes()
        except (OSError, ValueError):
            return None
        if meta.get("key") != key or len(body) != meta.get("size") or zlib.crc32(body) != meta.get("crc32"):
            return None
        if kind is CacheKind.MUTABLE and self._now() - float(meta.get("time", 0)) > self.max_age:
            return None
        return Stored(int(meta["status"]), dict(meta.get("headers", {})), body, str(meta.get("url", "")))

    def put(self, key: str, stored: Stored) -> None:
        meta_path, body_path = self._paths(key)
        headers = {k: v for k, v in stored.headers.items() if k in _KEPT_HEADERS}
        meta = {
            "key": key,
            "status": stored.status,
            "headers": headers,
            "url": stored.url,
            "size": len(stored.body),
            "crc32": zlib.crc32(stored.body),
            "time": self._now(),
        }
        with contextlib.suppress(OSError):  # a cache that cannot be written is no cache, not an error
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(body_path, stored.body)
            _atomic_write(meta_path, json.dumps(meta).encode())

    def _paths(self, key: str) -> tuple[Path, Path]:
        digest = hashlib.sha256(key.encode()).hexdigest()
        folder = self.directory / digest[:2]
        return folder / f"{digest}.json", folder / f"{digest}.body"


def _atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary file and rename it, so a parallel reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
