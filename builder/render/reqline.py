"""One requirement as pip reads it, a line of a requirements file or a --pip value, as an Entry: a PEP 508
requirement (`numpy >= 1.20; python_version >= "3.9"`, `name @ https://...`), a bare URL (an archive, or
git+https), or a local path (a project folder, a wheel or sdist). A URL that carries credentials is refused: the
build's requirements file is kept in the image. A local path must stay inside the requirements file's folder
(links resolved); one given with --pip is the user's own choice and may be anywhere.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from builder.core import safety
from builder.core.errors import UsageError
from builder.render.pins import canonical
from builder.render.reqtypes import REQ_CONTEXT, Entry, Kind, LocalSource, SourceKind

ARCHIVES = (".whl", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip", ".tar")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_PLAIN_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}", re.ASCII)
_EXTRAS = re.compile(r"^(.*?)(\[[A-Za-z0-9._,\s-]*\])?$", re.DOTALL)
GIT_SCHEMES = ("git+https", "git+http")
URL_SCHEMES = ("https", "http")


@dataclass(frozen=True)
class Place:
    """Where a requirement is read: what messages name, and what its relative paths mean."""

    where: str  # reqs.txt:3, or --pip
    flag: str  # --requirements reqs.txt:3, or --pip
    folder: Path  # relative paths resolve against it
    root: Path | None  # local paths must resolve inside it (None: a path the user named on the command line)


class Sources:
    """The names local sources get in the build context, numbered in the order they are read."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.count = 0

    def context(self, real: Path, kind: SourceKind) -> str:
        self.count += 1
        number = f"{self.prefix}{self.count:02d}"
        if kind == "archive":  # pip reads a wheel's name, version and tags from its file name: kept as it is
            return f"{REQ_CONTEXT}/{number}/{real.name}"
        return f"{REQ_CONTEXT}/{number}-{re.sub(r'[^A-Za-z0-9._-]+', '-', real.name).strip('.-') or 'src'}"


def read_entry(text: str, place: Place, sources: Sources, hashes: tuple[str, ...] = ()) -> Entry:
    if "${" in text:
        raise UsageError(
            f"{place.flag}: {text!r}: environment variables are expanded in index options only (their values go "
            "into a secret); a requirement is kept in the image: write it out"
        )
    if _SCHEME.match(text) or text.startswith("git+"):
        return _bare_url(text, place, sources, hashes)
    if _looks_like_path(text):
        path, marker = _split_marker(text, ";")
        location, extras = _extras(path, place)
        return _local(location, None, extras, marker, place, sources, hashes)
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(
            f"{place.flag}: {safety.redact(text)[:120]!r} is not a requirement pip reads ({str(exc).splitlines()[0]})"
        ) from None
    marker = str(req.marker) if req.marker else None
    if req.url is None:
        line, spec = str(req), str(req.specifier)
        return Entry(where=place.where, line=line, name=canonical(req.name), specifier=spec, marker=marker,
                     hashes=hashes)  # fmt: skip
    return _named_url(req, marker, place, sources, hashes)


def _looks_like_path(text: str) -> bool:
    # pip's rule: a path separator or a leading dot, or an archive's name (`foo-1.0.tar.gz`)
    head = text.split(";", 1)[0].strip()
    if "://" in head:  # `name @ https://host/x.whl` is a requirement with a URL, whatever it ends with
        return False
    return head.startswith((".", "/")) or ("/" in head and "@" not in head) or head.lower().endswith(ARCHIVES)


def _split_marker(text: str, separator: str) -> tuple[str, str | None]:
    head, sep, marker = text.partition(separator)
    return head.strip(), (marker.strip() or None) if sep else None


def _extras(path: str, place: Place) -> tuple[str, str]:
    found = _EXTRAS.match(path)
    assert found is not None  # the pattern matches any text
    extras = found.group(2) or ""
    if extras and not Requirement(f"x{extras}").extras:
        raise UsageError(f"{place.flag}: {path!r}: empty extras")
    return found.group(1), extras.replace(" ", "")


def _bare_url(text: str, place: Place, sources: Sources, hashes: tuple[str, ...]) -> Entry:
    url, marker = _split_marker(text, "; ")
    scheme = url.split("://", 1)[0].lower()
    if scheme == "file":
        return _local(_file_path(url, place), None, "", marker, place, sources, hashes)
    egg = _EGG.search(url)
    name = canonical(egg.group(1)) if egg else _wheel_name(url)
    kind = _remote_kind(url, scheme, place)
    line = f"{name} @ {url}" if name else url
    return Entry(where=place.where, line=line + (f" ; {marker}" if marker else ""), name=name, marker=marker,
                 hashes=hashes, kind=kind)  # fmt: skip


def _named_url(req: Requirement, marker: str | None, place: Place, sources: Sources, hashes: tuple[str, ...]) -> Entry:
    url = req.url or ""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    if scheme == "file":
        return _local(_file_path(url, place), canonical(req.name), extras, marker, place, sources, hashes)
    kind = _remote_kind(url, scheme, place)
    return Entry(where=place.where, line=str(req), name=canonical(req.name), marker=marker, hashes=hashes, kind=kind)


def _remote_kind(url: str, scheme: str, place: Place) -> Kind:
    if scheme not in (*GIT_SCHEMES, *URL_SCHEMES):
        raise UsageError(
            f"{place.flag}: {safety.redact(url)!r}: only https (and http) archives and git+https repositories are "
            "installed from a URL (an SSH key or a local repository has no place in a build)"
        )
    if safety.redact(url) != url:
        raise UsageError(
            f"{place.flag}: {safety.redact(url)!r}: credentials in this URL would land in the image (pip keeps the "
            "URL it installed from); serve the file from an index given with --pip-index-url (a secret)"
        )
    return "git" if scheme in GIT_SCHEMES else "url"


def _wheel_name(url: str) -> str | None:
    filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    return canonical(filename.split("-", 1)[0]) if filename.endswith(".whl") and "-" in filename else None


def _file_path(url: str, place: Place) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise UsageError(f"{place.flag}: {url!r}: a file URL names a path on this machine (file:///path)")
    return urllib.parse.unquote(parts.path)


def _local(location: str, name: str | None, extras: str, marker: str | None, place: Place, sources: Sources,
           hashes: tuple[str, ...]) -> Entry:  # fmt: skip
    source = local_source(location, place, sources)
    path = source.image_path
    line = f"{name}{extras} @ file://{path}" if name else f"{path}{extras}"
    line += f" ; {marker}" if marker else ""
    return Entry(where=place.where, line=line, name=name, marker=marker, hashes=hashes, kind="path", source=source)


def local_source(location: str, place: Place, sources: Sources, *, wheels: bool = False) -> LocalSource:
    """A local project folder or archive (`wheels`: a folder of wheels for --find-links), checked: inside the
    root (links resolved), a project folder with pyproject.toml or setup.py, an archive by its plain file name."""
    real = Path(os.path.realpath(place.folder / location))
    shown = f"{place.flag}: {location}"
    if place.root is not None and not real.is_relative_to(place.root):
        raise UsageError(
            f"{shown}: outside {place.root}, the requirements file's folder (links resolved); copy it in, or give "
            "it with --pip"
        )
    if real.is_dir():
        kind: SourceKind = "wheels" if wheels else "project"
        if kind == "project" and not ((real / "pyproject.toml").is_file() or (real / "setup.py").is_file()):
            raise UsageError(f"{shown}: a folder with no pyproject.toml or setup.py in it")
    elif real.is_file() and not wheels:
        kind = "archive"
        if not (_PLAIN_FILE.fullmatch(real.name) and real.name.lower().endswith(ARCHIVES)):
            raise UsageError(f"{shown}: not a wheel or sdist by its name (letters, digits, '.', '_', '+', '-')")
    else:
        raise UsageError(f"{shown}: no such {'folder' if wheels else 'folder or file'}")
    return LocalSource(host=str(real), context=sources.context(real, kind), kind=kind, flag=place.flag)
