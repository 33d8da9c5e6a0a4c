"""The file each installed distribution came from: on the indexes, the wheel whose name, version and tags are
exactly those its WHEEL file records (or, for one built from source, the version's sdist), with its sha256."""

from __future__ import annotations

from packaging.tags import parse_tag
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from builder.core.errors import UpstreamError
from builder.lock.model import Artifact, Installed, Left, Locked
from builder.net.http import Http
from builder.upstream.index import IndexFile, IndexFormatError, ProjectPage, read_project
from builder.upstream.wheels import wheels

PYPI = "https://pypi.org/simple"
# Wheels built in the image from an sdist carry tags no index file has: `pip wheel` writes py3-none-any or
# cpXY-cpXY-linux_x86_64 (not manylinux); for those the sdist is the file that was installed.
_LOCAL_PLATFORMS = ("linux_x86_64", "linux_aarch64")


def locate(http: Http, dist: Installed, indexes: tuple[str, ...]) -> Locked | Left:
    """The artifact on the first index that has it; Left (and why) when none does or the install was local."""
    if dist.local is not None:
        return Left(name=dist.name, version=dist.version, why=f"installed from {dist.local}, on no index")
    for index in indexes:
        page = _page(http, index, dist.name)
        found = _match(page, dist) if page is not None else None
        if found is not None:
            return Locked(name=dist.name, version=dist.version, index=index, artifact=_artifact(found))
    where = ", ".join(indexes)
    what = f"a wheel tagged {'.'.join(dist.tags)}" if dist.tags else "a file of this version"
    return Left(name=dist.name, version=dist.version, why=f"no index has {what} ({where})")


def _page(http: Http, index: str, name: str) -> ProjectPage | None:
    try:
        return read_project(http, index, name)
    except IndexFormatError as exc:
        raise UpstreamError(f"{index}: {exc}") from None


def _match(page: ProjectPage, dist: Installed) -> IndexFile | None:
    try:
        version = Version(dist.version)
    except InvalidVersion:
        return None
    wanted = frozenset(t for text in dist.tags for t in parse_tag(text))
    for wheel in wheels(page.files, dist.name, version):
        if wheel.tags == wanted and wheel.file.sha256 and not wheel.file.yanked:
            return wheel.file
    if wanted and not all(t.platform in ("any", *_LOCAL_PLATFORMS) for t in wanted):
        return None  # a wheel from an index the lock was not told of: no sdist stands in for it
    return next((f for f in page.files if _is_sdist_of(f, dist.name, version)), None)


def _is_sdist_of(file: IndexFile, name: str, version: Version) -> bool:
    try:
        sdist_name, sdist_version = parse_sdist_filename(file.filename)
    except (InvalidSdistFilename, InvalidVersion):
        return False
    return sdist_name == canonicalize_name(name) and sdist_version == version and bool(file.sha256)


def _artifact(file: IndexFile) -> Artifact:
    assert file.sha256 is not None  # _match takes files with a hash only
    return Artifact(
        filename=file.filename,
        url=file.url,
        size=file.size,
        sha256=file.sha256,
        upload_time=file.upload_time,
    )
