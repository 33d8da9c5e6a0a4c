"""`torchyard matrix sync --onnxruntime VERSION`: the [[onnxruntime]] entry of an ONNX Runtime release, read from
PyPI: its Pythons (cpXY wheels on every Linux platform it has), its platforms and, for onnxruntime-gpu, the CUDA and
cuDNN majors its METADATA's `cuda` / `cudnn` extras name and, per platform, the GPU code of its CUDA provider read
from one wheel (cp312, else the newest cpXY) downloaded whole or found in --wheel-dir, sha256 checked against the
index. What cannot be read is "not recorded" with where to find it, never guessed."""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.core.errors import NoMatchError, UpstreamError, UsageError
from builder.core.kinds import Platform
from builder.matrix.model import Matrix
from builder.net.http import Http
from builder.upstream.index import IndexFile
from builder.upstream.lazywheel import WheelError, read_metadata
from builder.upstream.outdated import counted
from builder.upstream.sync import index_page
from builder.upstream.wheel_code import LibraryCode, WheelCodeError, read_wheel_code
from builder.upstream.wheel_fetch import fetch_wheel, local_wheel
from builder.upstream.wheels import Metadata, Wheel, environment, parse_metadata

ORT_PACKAGES = ("onnxruntime-gpu", "onnxruntime")
_CP = re.compile(r"cp(\d)(\d+)")
_RUNTIME = re.compile(r"nvidia-cuda-runtime(?:-cu(\d+))?")  # 1.29.0 on: no -cu13 suffix, the major in ~=13.0
_CUDNN = re.compile(r"nvidia-cudnn-cu\d+")
_LINKED = re.compile(r"lib(cudart|cudnn)\.so\.(\d+)")
CODE_WHERE = "read its CUDA provider by hand (docs/matrix.md, Reading a wheel's GPU code)"


@dataclass(frozen=True)
class PlatformCode:
    """One platform's wheel chosen for the GPU code, and what reading it gave."""

    platform: Platform
    wheel: IndexFile
    code: LibraryCode | None  # None: not recorded (why says why and where to read it)
    metadata: Metadata | None = None
    why: str = ""


@dataclass(frozen=True)
class Majors:
    cuda: int
    cudnn: int
    evidence: str  # where they were read
    note: str = ""  # for the entry's note: read from the provider's libraries, or the two disagree


@dataclass(frozen=True)
class OrtProposal:
    package: str
    version: Version
    page: str
    python: tuple[str, ...]
    platforms: tuple[Platform, ...]
    notes: tuple[str, ...]
    majors: Majors | None = None  # None: the CPU package
    code: tuple[PlatformCode, ...] = ()


def propose_ort(
    m: Matrix, http: Http, package: str, version: Version, pypi: str, wheel_dir: Path | None = None
) -> OrtProposal:
    if any(o.package == package and o.version == version for o in m.onnxruntime):
        raise UsageError(f"--onnxruntime {version}: the matrix has {package} {version} already")
    page = index_page(http, pypi, package)
    releases = counted(page, package)
    if version not in releases:
        newest = max(releases, default=None)
        raise NoMatchError(f"{page.url} lists no {package} {version} Linux wheels (newest: {newest})")
    per = {p: ws for p in Platform if (ws := [w for w in releases[version] if _on(w, p)])}
    python, notes = pythons(per)
    if package != "onnxruntime-gpu":
        return OrtProposal(package, version, page.url, python, tuple(per), notes)
    code = _read_all(http, per, wheel_dir)
    majors = _majors(http, f"{package} {version}", code)
    notes += (majors.note,) if majors.note else ()
    return OrtProposal(package, version, page.url, python, tuple(per), notes, majors, code)


def _on(wheel: Wheel, platform: Platform) -> bool:
    return any(p.startswith("manylinux") and p.endswith(f"_{platform.machine}") for p in wheel.platforms)


def _cpython(wheel: Wheel, platform: Platform) -> set[tuple[int, int]]:
    """The CPython minors a wheel serves on a platform (cpXY-cpXY: not the free-threaded cpXYt builds)."""
    return {
        (int(m[1]), int(m[2]))
        for t in wheel.tags
        if (m := _CP.fullmatch(t.interpreter)) and t.abi == t.interpreter and t.platform.endswith(platform.machine)
    }


def pythons(per: dict[Platform, list[Wheel]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The Pythons with wheels on every platform, and a note for those only some platforms have."""
    found = {p: set().union(*(_cpython(w, p) for w in ws)) for p, ws in per.items()}
    common = set.intersection(*found.values()) if found else set()
    if not common:
        raise NoMatchError("no CPython wheel (cpXY-cpXY) on every Linux platform: its Pythons are not recorded")
    notes = tuple(
        f"{p.arch} also has wheels for Python {', '.join(f'{a}.{b}' for a, b in sorted(extra))}"
        for p, minors in found.items()
        if (extra := minors - common)
    )
    return tuple(f"{a}.{b}" for a, b in sorted(common)), notes


def chosen(wheels: list[Wheel], platform: Platform) -> Wheel:
    """The wheel whose provider is read: cp312, else the newest CPython's."""
    by_python = {minor: w for w in wheels for minor in _cpython(w, platform)}
    if not by_python:
        return sorted(wheels, key=lambda w: w.file.filename)[-1]
    return by_python.get((3, 12)) or by_python[max(by_python)]


# --- the GPU code, one wheel per platform ---------------------------------------------------------------------


def _read_all(http: Http, per: dict[Platform, list[Wheel]], wheel_dir: Path | None) -> tuple[PlatformCode, ...]:
    """Each platform's wheel read in turn; a downloaded one is deleted once read (one on the disk at a time) and
    the folder goes with the run."""
    with tempfile.TemporaryDirectory(prefix="torchyard-ort-") as scratch:
        return tuple(_read_one(http, p, chosen(ws, p).file, wheel_dir, Path(scratch)) for p, ws in per.items())


def _read_one(http: Http, platform: Platform, file: IndexFile, wheel_dir: Path | None, scratch: Path) -> PlatformCode:
    path = local_wheel(wheel_dir, file) if wheel_dir else fetch_wheel(http, file, scratch)
    if path is None:
        why = f"{file.filename} is not in {wheel_dir}: download {file.url} there, or run without --wheel-dir"
        return PlatformCode(platform, file, None, why=why)
    try:
        code, why = read_wheel_code(path), ""
    except (WheelCodeError, zipfile.BadZipFile, OSError) as exc:
        code, why = None, f"{file.filename}: {exc}: {CODE_WHERE}"
    metadata = _local_metadata(path)
    if wheel_dir is None:
        path.unlink()
    return PlatformCode(platform, file, code, metadata, why)


def _local_metadata(path: Path) -> Metadata | None:
    try:
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
            return parse_metadata(archive.read(name).decode("utf-8", errors="replace"))
    except (StopIteration, zipfile.BadZipFile, ValueError):
        return None


# --- the CUDA and cuDNN majors -----------------------------------------------------------------------------------


def _majors(http: Http, label: str, code: tuple[PlatformCode, ...]) -> Majors:
    """From the METADATA's extras (`cuda`: nvidia-cuda-runtime, `cudnn`: nvidia-cudnn-cuNN ~=9.x), else from the
    libraries the provider links (1.18 and 1.19 have no extras); neither: refused, never guessed."""
    wheel = code[0].wheel
    meta = next((c.metadata for c in code if c.metadata is not None), None) or _remote_metadata(http, wheel)
    linked = _linked(code)
    cuda, cudnn = _extra(meta, "cuda", _RUNTIME), _extra(meta, "cudnn", _CUDNN)
    if cuda and cudnn:
        evidence = f"{wheel.filename} METADATA: cuda extra {cuda[1]}, cudnn extra {cudnn[1]}"
        runtime = linked.get("cudart")
        clash = runtime is not None and runtime[0] != cuda[0]
        note = f"its CUDA provider links {runtime[1]}, its cuda extra names CUDA {cuda[0]}" if runtime and clash else ""
        return Majors(cuda[0], cudnn[0], evidence, note)
    if not cuda and not cudnn and {"cudart", "cudnn"} <= set(linked):
        libs = f"{linked['cudart'][1]}, {linked['cudnn'][1]}"
        note = f"its METADATA has no cuda/cudnn extras: the majors are the libraries its CUDA provider links ({libs})"
        return Majors(linked["cudart"][0], linked["cudnn"][0], f"{wheel.filename}: its provider links {libs}", note)
    raise NoMatchError(
        f"{label}: its CUDA or cuDNN major is not recorded: neither {wheel.filename}'s METADATA (cuda and cudnn "
        "extras) nor its CUDA provider's libraries name both; read them from its release notes (onnxruntime.ai, "
        "CUDA Execution Provider requirements)"
    )


def _linked(code: tuple[PlatformCode, ...]) -> dict[str, tuple[int, str]]:
    """cudart / cudnn -> (major, the library as DT_NEEDED names it), from the providers read."""
    found: dict[str, tuple[int, str]] = {}
    for c in code:
        for name in c.code.needed if c.code else ():
            if match := _LINKED.match(name):
                found.setdefault(match[1], (int(match[2]), name))
    return found


def _remote_metadata(http: Http, file: IndexFile) -> Metadata:
    try:
        return parse_metadata(read_metadata(http, file.url))
    except (WheelError, ValueError) as exc:
        raise UpstreamError(f"cannot read the METADATA of {file.filename}: {exc}") from None


def _extra(meta: Metadata, extra: str, name: re.Pattern[str]) -> tuple[int, str] | None:
    """(major, requirement as written) of the extra's requirement on `name`: the -cuNN suffix of the CUDA runtime
    where it has one, else the release its ~= or == specifier names."""
    plain = environment("3.12", "linux/amd64")
    for requirement in meta.requires:
        found, marker = name.fullmatch(canonicalize_name(requirement.name)), requirement.marker
        if found is None or marker is None or marker.evaluate(plain) or not marker.evaluate(plain | {"extra": extra}):
            continue  # not that package, or not asked for by this extra alone
        if found.lastindex and found[1]:
            return int(found[1]), _written(requirement)
        pinned = [s.version for s in requirement.specifier if s.operator in ("~=", "==")]
        if pinned:
            return Version(pinned[0].removesuffix(".*")).major, _written(requirement)
    return None


def _written(requirement: Requirement) -> str:
    return f"{requirement.name}{requirement.specifier}"
