"""The file each installed distribution came from: on the indexes, the wheel whose name, version and tags are
exactly those its WHEEL file records (or, for one built from source, the version's sdist), with its sha256."""

from __future__ import annotations

import re

from packaging.tags import Tag, parse_tag
from packaging.utils import InvalidSdistFilename, canonicalize_name, parse_sdist_filename
from packaging.version import InvalidVersion, Version

from builder.core.errors import UpstreamError
from builder.lock.model import Artifact, Installed, Left, Locked
from builder.net.http import Http
from builder.upstream.index import IndexFile, IndexFormatError, ProjectPage, read_project
from builder.upstream.lazywheel import WheelError, read_member
from builder.upstream.wheels import Wheel, wheels

PYPI = "https://pypi.org/simple"
# Wheels built in the image from an sdist carry tags no index file has: `pip wheel` writes py3-none-any or
# cpXY-cpXY-linux_x86_64 (not manylinux); for those the sdist is the file that was installed.
_LOCAL_PLATFORMS = ("linux_x86_64", "linux_aarch64")
_LINUX_PLATFORM = re.compile(r"^(?:many|musl)linux(?:_\d+_\d+|1|2010|2014)_(x86_64|aarch64)$")
_WHEEL = re.compile(r"^[^/]+\.dist-info/WHEEL$")


def locate(http: Http, dist: Installed, indexes: tuple[str, ...]) -> Locked | Left:
    """The artifact on the first index that has it; Left (and why) when none does or the install was local."""
    if dist.local is not None:
        return Left(name=dist.name, version=dist.version, why=f"installed from {dist.local}, on no index")
    for index in indexes:
        page = _page(http, index, dist.name)
        found = _match(http, page, dist) if page is not None else None
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


def _match(http: Http, page: ProjectPage, dist: Installed) -> IndexFile | None:
    try:
        version = Version(dist.version)
    except InvalidVersion:
        return None
    wanted = frozenset(t for text in dist.tags for t in parse_tag(text))
    candidates = [w for w in wheels(page.files, dist.name, version) if w.file.sha256 and not w.file.yanked]
    for wheel in candidates:
        if wheel.tags == wanted:
            return wheel.file
    if wanted and not all(t.platform in ("any", *_LOCAL_PLATFORMS) for t in wanted):
        return None  # a wheel from an index the lock was not told of: no sdist stands in for it
    renamed = _renamed(http, candidates, wanted)
    return renamed or next((f for f in page.files if _is_sdist_of(f, dist.name, version)), None)


def _renamed(http: Http, candidates: list[Wheel], wanted: frozenset[Tag]) -> IndexFile | None:
    """The manylinux / musllinux wheel whose own WHEEL file records the plain linux_<arch> tags the image's does:
    a file renamed after its build without its WHEEL being rewritten (torchaudio 2.11.1 on PyPI:
    ...-py3-none-manylinux_2_28_x86_64.whl says `Tag: py3-none-linux_x86_64`). Its WHEEL is read with range
    requests; a wheel built in the image from an sdist is not such a file, unless its WHEEL says the same."""
    local = {(t.interpreter, t.abi, t.platform.removeprefix("linux_")) for t in wanted}
    for wheel in candidates:
        if {(t.interpreter, t.abi, _machine(t.platform)) for t in wheel.tags} != local:
            continue
        try:
            recorded = read_member(http, wheel.file.url, _WHEEL)
        except WheelError:  # not readable by ranges: no evidence, the file is not claimed
            continue
        tags = frozenset(
            t for line in recorded.splitlines() if line.startswith("Tag:") for t in parse_tag(line[4:].strip())
        )
        if tags == wanted:
            return wheel.file
    return None


def _machine(platform: str) -> str | None:
    """x86_64 of manylinux_2_28_x86_64 / manylinux2014_x86_64 / musllinux_1_2_x86_64; None for other platforms."""
    found = _LINUX_PLATFORM.match(platform)
    return found.group(1) if found else None


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
