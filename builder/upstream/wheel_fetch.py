"""Whole wheel files, for what range requests cannot read (the GPU code of a library inside: it has to be unpacked):
downloaded streamed into a folder the caller owns (a few hundred MB each: never held in memory), or found in a
folder a person filled; either way the file must be the one the index lists (its sha256)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from builder.core.errors import UpstreamError, UsageError
from builder.net.http import Http
from builder.upstream.index import IndexFile

CHUNK = 1 << 20


def fetch_wheel(http: Http, file: IndexFile, folder: Path) -> Path:
    """The wheel downloaded into `folder`, checked against the index's sha256 as it arrives."""
    wanted = _listed_digest(file)
    target = folder / file.filename
    digest = hashlib.sha256()
    with http.stream("GET", file.url) as got:
        if not got.ok:
            raise UpstreamError(f"{file.url} answered HTTP {got.status_code}")
        with target.open("wb") as out:
            for chunk in http.chunks(got, CHUNK):
                digest.update(chunk)
                out.write(chunk)
    if digest.hexdigest() != wanted:
        target.unlink()
        raise UpstreamError(f"{file.url}: the download's sha256 is {digest.hexdigest()}, the index lists {wanted}")
    return target


def local_wheel(folder: Path, file: IndexFile) -> Path | None:
    """The wheel in `folder` (None where it is not there), refused unless it is the file the index lists."""
    path = folder / file.filename
    if not path.is_file():
        return None
    wanted, found = _listed_digest(file), sha256_of(path)
    if found != wanted:
        raise UsageError(f"{path}: sha256 {found}, but the index lists {wanted} for {file.filename}: not that wheel")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _listed_digest(file: IndexFile) -> str:
    if not file.sha256:
        raise UpstreamError(f"{file.url}: the index lists no sha256, so the file cannot be checked")
    return file.sha256
