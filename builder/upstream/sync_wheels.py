"""`torchyard matrix sync --nvidia-wheel PACKAGE`: the releases of an NVIDIA library wheel newer than the newest
matrix.toml records (those `matrix outdated` lists), each with the manylinux tag of its x86_64 and aarch64 wheels
read from PyPI's file list. A release whose tags are those of the entry holding the newest recorded version joins
that entry; one whose tags differ starts a new entry, with a note naming the change. A machine without a wheel is
left out of the tags and named in the note; no tag is ever written that no file name carries."""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import Version

from builder.core.errors import NoMatchError, UsageError
from builder.matrix.model import Matrix, NvidiaWheel
from builder.net.http import Http
from builder.upstream.outdated import counted
from builder.upstream.sync import index_page
from builder.upstream.wheels import Wheel, glibc_floor

SYNCED = ("nvidia-cudnn-cu13", "nvidia-nccl-cu13")
# cuda-toolkit is a py2.py3-none-any meta-package: its floor is the highest of the components that the extras torch
# names install, which neither its file list nor its METADATA alone says (docs/matrix.md, [[nvidia_wheel]]).
REFUSED = ("cuda-toolkit",)
MACHINES = ("x86_64", "aarch64")


@dataclass(frozen=True)
class WheelRelease:
    """One release as its Linux wheels are tagged: a PEP 600 tag per machine that has a wheel."""

    version: Version
    tags: tuple[str, ...]  # x86_64 first; a machine without a manylinux wheel is left out
    files: tuple[str, ...]  # the wheels the tags were read from
    legacy: tuple[str, ...] = ()  # tags the file names write in a legacy form (manylinux2014_x86_64)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(m for m in MACHINES if not any(t.endswith(f"_{m}") for t in self.tags))


@dataclass
class Group:
    """Releases for one [[nvidia_wheel]] entry: the recorded one holding the newest version (`new` False), or a
    new entry after it."""

    tags: tuple[str, ...]
    new: bool
    versions: list[Version] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class WheelProposal:
    package: str
    newest: Version  # the newest the matrix records
    page: str  # the index page read
    groups: tuple[Group, ...]  # the recorded entry first (maybe with nothing to add), then the new ones

    @property
    def added(self) -> tuple[Version, ...]:
        return tuple(v for g in self.groups for v in g.versions)


def propose_wheels(m: Matrix, http: Http, package: str, pypi: str) -> WheelProposal:
    holder = _holder(m, package)
    newest = max(holder.versions)
    page = index_page(http, pypi, package)
    releases = [read_tags(v, ws) for v, ws in sorted(counted(page, package).items()) if v > newest]
    return WheelProposal(package, newest, page.url, _groups(package, holder, newest, releases))


def newer_versions(m: Matrix, http: Http, package: str, pypi: str) -> tuple[Version, list[Version]]:
    """The newest recorded and the releases newer than it (for a package whose tags sync does not read)."""
    newest = max(_holder(m, package).versions)
    return newest, sorted(v for v in counted(index_page(http, pypi, package), package) if v > newest)


def _holder(m: Matrix, package: str) -> NvidiaWheel:
    """The entry holding the newest recorded version of the package."""
    entries = [w for w in m.nvidia_wheels if w.package == package]
    if not entries:
        known = ", ".join(sorted({w.package for w in m.nvidia_wheels}))
        raise UsageError(f"--nvidia-wheel {package}: matrix.toml has no [[nvidia_wheel]] of it (it has {known})")
    return max(entries, key=lambda w: max(w.versions))


def read_tags(version: Version, wheels: list[Wheel]) -> WheelRelease:
    """The PEP 600 tag of each machine's wheels (the lowest floor a compressed tag set names: pip installs the
    wheel from there on); wheels of one machine that disagree are refused, not averaged."""
    tags: list[str] = []
    files: list[str] = []
    legacy: list[str] = []
    for machine in MACHINES:
        found = {w.file.filename: read for w in wheels if (read := _floor_tag(w, machine)) is not None}
        if len({pep600 for pep600, _ in found.values()}) > 1:
            listed = ", ".join(f"{name} ({pep600})" for name, (pep600, _) in sorted(found.items()))
            raise NoMatchError(f"{version}: its {machine} wheels disagree on the glibc floor: {listed}")
        if found:
            name, (tag, written) = min(found.items())
            tags.append(tag)
            files.append(name)
            legacy += [written] if written != tag else []
    return WheelRelease(version, tuple(tags), tuple(files), tuple(legacy))


def _floor_tag(wheel: Wheel, machine: str) -> tuple[str, str] | None:
    """(the PEP 600 tag, the tag as the file name writes it) of the lowest manylinux floor for this machine."""
    written = [p for p in wheel.platforms if p.startswith("manylinux") and p.endswith(f"_{machine}")]
    floors = [(f, not p.startswith("manylinux_"), p) for p in written if (f := glibc_floor(p)) is not None]
    if not floors:
        return None
    floor, _, tag = min(floors)  # the PEP 600 spelling of a floor where the file name has it too
    return f"manylinux_{floor.major}_{floor.minor}_{machine}", tag


def _groups(package: str, holder: NvidiaWheel, newest: Version, releases: list[WheelRelease]) -> tuple[Group, ...]:
    groups = [Group(tuple(holder.platform_tags), new=False)]
    previous = newest
    for release in releases:
        if not release.tags:
            raise NoMatchError(f"{package} {release.version}: no manylinux wheel to read a tag from (not recorded)")
        if set(release.tags) != set(groups[-1].tags):
            groups.append(Group(release.tags, new=True, note=_note(package, groups[-1].tags, previous, release)))
        groups[-1].versions.append(release.version)
        groups[-1].files += release.files
        previous = release.version
    return tuple(groups)


def _note(package: str, before: tuple[str, ...], previous: Version, release: WheelRelease) -> str:
    moved = f"{_floors(before)} ({previous}) to {_floors(release.tags)} with {release.version}"
    said = [f"{package}'s wheels moved from {moved}"]
    said += [f"no {m} wheel on PyPI for {release.version}" for m in release.missing]
    said += [f"tagged {_floors((t,))} (the same floor)" for t in release.legacy[:1]]
    return "; ".join(said)


def _floors(tags: tuple[str, ...]) -> str:
    """manylinux_2_27 where every machine has the same floor, else the tags themselves."""
    heads = {t.removesuffix("_x86_64").removesuffix("_aarch64") for t in tags}
    return heads.pop() if len(heads) == 1 else ", ".join(tags)
