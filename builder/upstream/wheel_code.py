"""The GPU code a shared library inside a wheel carries, read from the wheel file itself: the SASS and PTX
architectures of its fat binary (builder/smoke/fatbin.py, the reader the smoke suite uses) and the libraries it
links (DT_NEEDED: libcudart.so.12, libcudnn.so.9 say which CUDA and cuDNN majors it was built for). What
matrix.toml's [onnxruntime.<platform>] tables record (docs/matrix.md, "Reading a wheel's GPU code"); `matrix sync
--onnxruntime` calls `read_wheel_code` on the wheel it downloaded (builder/upstream/sync_ort.py), and `code_table`
prints the table.

The member is extracted to a temporary folder (a provider library is ~300 MB unpacked) and removed after reading.
"""

from __future__ import annotations

import hashlib
import mmap
import shutil
import struct
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from builder.core.archs import arch_from
from builder.smoke.fatbin import code_list

ORT_CUDA_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
_DT_NULL, _DT_NEEDED = 0, 1


class WheelCodeError(ValueError):
    """The wheel has no such member, or the member is not a readable ELF64 library."""


@dataclass(frozen=True, kw_only=True)
class LibraryCode:
    """What one library of one wheel was built for."""

    wheel: str  # the wheel's file name
    sha256: str  # of the wheel file, as PyPI's index lists it
    member: str  # the library's path inside the wheel
    sass: tuple[str, ...]  # compute capabilities with SASS: "7.5", "9.0a"
    ptx: tuple[str, ...]  # compute capabilities with PTX
    needed: tuple[str, ...]  # DT_NEEDED, in the library's order
    counts: dict[str, int]  # fat binary entries per target (sm_75: 217), for a person to judge


def read_wheel_code(wheel: Path, member: str = ORT_CUDA_PROVIDER) -> LibraryCode:
    """Read `member` of the wheel at `wheel` (a local file: download it first, e.g. `pip download --no-deps`)."""
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory(prefix="torchyard-wheel-") as scratch:
        if member not in archive.namelist():
            raise WheelCodeError(f"{wheel.name} has no {member}")
        library = Path(scratch) / "library.so"
        with archive.open(member) as source, library.open("wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
        found = code_list(str(library))
        needed = needed_libraries(library)
    sass, ptx = found.names()
    return LibraryCode(
        wheel=wheel.name,
        sha256=_sha256(wheel),
        member=member,
        sass=tuple(_cc(name) for name in sass),
        ptx=tuple(_cc(name) for name in ptx),
        needed=needed,
        counts=dict(found.counts),
    )


def _cc(name: str) -> str:
    """sm_90a / compute_90 -> 9.0a / 9.0: how matrix.toml writes architectures."""
    return arch_from(name).cc


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def needed_libraries(path: Path) -> tuple[str, ...]:
    """The DT_NEEDED entries of an ELF64 little-endian shared library (x86_64 and aarch64 alike)."""
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise WheelCodeError(f"{path.name} is not an ELF64 little-endian file")
        sections = _sections(data)
        if ".dynamic" not in sections or ".dynstr" not in sections:
            return ()
        (dyn_at, dyn_size), (str_at, _) = sections[".dynamic"], sections[".dynstr"]
        found = []
        for at in range(dyn_at, dyn_at + dyn_size - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                found.append(_string(data, str_at + value))
        return tuple(found)


def _string(data: mmap.mmap, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode("ascii", errors="replace")


def _sections(data: mmap.mmap) -> dict[str, tuple[int, int]]:
    """Section name -> (file offset, size), from the section header table."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    (names_at,) = struct.unpack_from("<Q", data, shoff + names_index * entsize + 0x18)
    found = {}
    for index in range(count):
        base = shoff + index * entsize
        (name_off,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        found[_string(data, names_at + name_off)] = (offset, size)
    return found


def code_table(code: LibraryCode, parent: str, platform: str, source: str) -> str:
    """The matrix.toml sub-table that records it ([onnxruntime.amd64]), with where it was read."""
    return (
        f"# read from {code.wheel}: {code.member} links {' '.join(code.needed) or 'nothing'}\n"
        f"[{parent}.{platform}]\n"
        f"sass = {_toml_list(code.sass)}\n"
        f"ptx = {_toml_list(code.ptx)}\n"
        f'wheel = "{code.wheel}"\n'
        f'sha256 = "{code.sha256}"\n'
        f'source = "{source}"\n'
    )


def _toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"
