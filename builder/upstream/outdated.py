"""`torchyard matrix outdated`: the releases upstream has that matrix.toml lacks.

Each tracked project says where the matrix records it and which of upstream's releases it should hold:
torch every release from the lowest recorded on (the matrix records each one); the NVIDIA wheels, ONNX
Runtime and the nvidia/cuda images only what is newer than the newest recorded (the matrix records the
releases torch pins and the newest, not every patch). Pre-releases, dev builds, yanked files and releases
without a Linux wheel are not counted. A project whose index or registry could not be read is "not checked",
never up to date.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from packaging.version import InvalidVersion, Version

from builder.core.errors import PushError, UpstreamError
from builder.matrix.model import Matrix
from builder.net.http import Http
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo
from builder.upstream.images import mirror_image
from builder.upstream.index import IndexFile, IndexFormatError, ProjectPage, read_project
from builder.upstream.wheels import Wheel, by_version

CUDA_IMAGES = "nvidia/cuda"
_IMAGE_TAG = re.compile(r"^(\d+\.\d+\.\d+)-")  # 13.1.0-cudnn-runtime-ubuntu24.04


class Window(Enum):
    EVERY = "every release from"
    NEWER = "newer than"


class State(Enum):
    CURRENT = "up to date"
    MISSING = "missing"
    NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class Tracked:
    name: str  # the PyPI project, or the image repository
    table: str  # where matrix.toml records it
    window: Window
    recorded: Callable[[Matrix], frozenset[Version]]
    add: str  # how a missing release gets into the matrix ({v}: the version)
    image: bool = False


@dataclass(frozen=True)
class Release:
    version: Version
    uploaded: str | None  # YYYY-MM-DD of its first file (PEP 700); None where the index does not say


@dataclass(frozen=True)
class Finding:
    tracked: Tracked
    state: State
    missing: tuple[Release, ...] = ()
    why: str = ""  # not checked: what could not be read
    floor: Version | None = None  # the window's bound: the lowest (EVERY) or newest (NEWER) recorded

    @property
    def window(self) -> str:
        return f"{self.tracked.window.value} {self.floor}" if self.floor else "nothing recorded"

    def as_json(self) -> dict[str, object]:
        t = self.tracked
        return {
            "name": t.name,
            "table": t.table,
            "window": self.window,
            "state": self.state.value,
            "missing": [
                {"version": str(r.version), "uploaded": r.uploaded, "add": t.add.format(v=r.version)}
                for r in self.missing
            ],
            "why": self.why or None,
        }


def _torch(m: Matrix) -> frozenset[Version]:
    return frozenset(r.version for r in m.torch)


def _wheel(package: str) -> Callable[[Matrix], frozenset[Version]]:
    return lambda m: frozenset(v for w in m.nvidia_wheels if w.package == package for v in w.versions)


def _ort(package: str) -> Callable[[Matrix], frozenset[Version]]:
    return lambda m: frozenset(o.version for o in m.onnxruntime if o.package == package)


def _images(m: Matrix) -> frozenset[Version]:
    return frozenset(i.cuda for i in m.cuda_images)


_WHEEL_ADD = "a version in its [[nvidia_wheel]] entry, with the platform tags of its wheels"
# matrix sync proposes every release newer than the newest recorded at once: the same line for each.
_SYNC_WHEEL = "torchyard matrix sync --nvidia-wheel {package}"
_SYNC_ORT = {
    "onnxruntime-gpu": "torchyard matrix sync --onnxruntime {v}",
    "onnxruntime": "torchyard matrix sync --onnxruntime {v} --package onnxruntime",
}
TRACKED = (
    Tracked("torch", "[[torch]]", Window.EVERY, _torch, "torchyard matrix sync --torch {v}"),
    Tracked("cuda-toolkit", "[[nvidia_wheel]]", Window.NEWER, _wheel("cuda-toolkit"), _WHEEL_ADD),
    *(
        Tracked(name, "[[nvidia_wheel]]", Window.NEWER, _wheel(name), _SYNC_WHEEL.format(package=name))
        for name in ("nvidia-cudnn-cu13", "nvidia-nccl-cu13")
    ),
    *(
        Tracked(name, "[[onnxruntime]]", Window.NEWER, _ort(name), _SYNC_ORT[name])
        for name in ("onnxruntime-gpu", "onnxruntime")
    ),
    Tracked(CUDA_IMAGES, "[[cuda_image]]", Window.NEWER, _images, "a [[cuda_image]] entry for CUDA {v}", image=True),
)


def outdated(
    m: Matrix, http: Http, registry: Distribution, pypi: str, mirror: str | None, names: Iterable[str] = ()
) -> list[Finding]:
    """One finding per tracked project (those named, else all), in TRACKED's order."""
    wanted = set(names)
    chosen = [t for t in TRACKED if not wanted or t.name in wanted]
    return [_check(m, t, http, registry, pypi, mirror) for t in chosen]


def _check(m: Matrix, t: Tracked, http: Http, registry: Distribution, pypi: str, mirror: str | None) -> Finding:
    recorded = t.recorded(m)
    if not recorded:
        return Finding(t, State.NOT_CHECKED, why=f"matrix.toml records no release of it in {t.table}")
    floor = min(recorded) if t.window is Window.EVERY else max(recorded)
    try:
        upstream = _image_releases(registry, mirror) if t.image else _index_releases(http, pypi, t.name)
    except (UpstreamError, PushError, IndexFormatError) as exc:
        return Finding(t, State.NOT_CHECKED, why=str(exc).splitlines()[0][:200], floor=floor)
    if upstream is None:
        return Finding(t, State.NOT_CHECKED, why=f"{pypi} has no project {t.name}", floor=floor)
    missing = tuple(
        r
        for r in sorted(upstream, key=lambda r: r.version)
        if r.version not in recorded and (r.version >= floor if t.window is Window.EVERY else r.version > floor)
    )
    return Finding(t, State.MISSING if missing else State.CURRENT, missing, floor=floor)


def _index_releases(http: Http, pypi: str, project: str) -> list[Release] | None:
    page = read_project(http, pypi, project)
    if page is None:
        return None
    return [Release(v, _first_upload(w.file for w in ws)) for v, ws in counted(page, project).items()]


def counted(page: ProjectPage, project: str) -> dict[Version, list[Wheel]]:
    """The releases that count (final, with a Linux wheel that is not yanked) and their wheels that are not
    yanked: what outdated lists and `matrix sync` reads."""
    found = by_version((f for f in page.files if not f.yanked), project)
    return {v: ws for v, ws in found.items() if _final(v) and any(_linux(w.platforms) for w in ws)}


def _final(v: Version) -> bool:
    return not (v.is_prerelease or v.is_devrelease or v.is_postrelease or v.local) and v.major > 0


def _linux(platforms: Iterable[str]) -> bool:
    return any(p == "any" or p.startswith(("manylinux", "linux_")) for p in platforms)


def _first_upload(files: Iterable[IndexFile]) -> str | None:
    times = sorted(f.upload_time for f in files if f.upload_time)
    return times[0][:10] if times else None


def _image_releases(registry: Distribution, mirror: str | None) -> list[Release]:
    repo = parse_repo(mirror_image(CUDA_IMAGES, mirror))
    versions: set[Version] = set()
    for tag in registry.every_tag(repo):
        found = _IMAGE_TAG.match(tag)
        if found is None:
            continue
        try:
            versions.add(Version(found.group(1)))
        except InvalidVersion:
            continue
    return [Release(v, None) for v in versions]
