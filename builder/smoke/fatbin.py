"""Which GPU architectures a shared library carries code for, read from its .nv_fatbin section.

No GPU and no CUDA tools needed: the fat binary container (magic 0xBA55ED50) lists entries of kind
PTX (1) or ELF/SASS (2), each with its target architecture (89 -> sm_89), before the (possibly
compressed) payload. Layout as reverse-engineered from cuobjdump (e.g. the fatbinary Rust crate);
tests compare it with torch.cuda.get_arch_list() and with cuobjdump itself.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

_MAGIC = struct.pack("<I", 0xBA55ED50)
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
_ENTRY = struct.Struct("<HHIQIIHHI")  # kind, -, header size, payload size, compressed, -, minor, major, arch
_FLAGS = struct.Struct("<Q")  # at offset 0x28 of an entry header of 48 bytes or more
_FLAGS_OFFSET = 0x28
# Entries for arch-specific targets (sm_90a, sm_100a, ...) carry this flag; cuobjdump names them with
# the `a` suffix (the counts match cuobjdump --list-elf on torch 2.14's libtorch_cuda.so: docs/smoke.md).
_ARCH_SPECIFIC = 0x100000
_KIND_PTX, _KIND_ELF = 1, 2


@dataclass
class CodeList:
    sass: set[str] = field(default_factory=set)  # "89" for sm_89, "90a" for sm_90a
    ptx: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)  # entries per name ("sm_89", "compute_90")

    def names(self) -> tuple[list[str], list[str]]:
        return [f"sm_{a}" for a in sorted(self.sass, key=_order)], [
            f"compute_{a}" for a in sorted(self.ptx, key=_order)
        ]

    def targets(self, share: float = 0.5) -> tuple[list[str], list[str]]:
        """The architectures the library was built for: those with code for (nearly) every kernel.

        torch's x86_64 libtorch_cuda.so carries 1 sm_89 cubin and 4 sm_90a ones beside ~475 per target
        (/work notes, cuobjdump): a few kernels built for extra architectures do not make the build run there.
        """
        sass, ptx = self.names()
        most = max((self.counts.get(a, 0) for a in sass + ptx), default=0)
        keep = [a for a in sass + ptx if self.counts.get(a, 0) >= share * most]
        return [a for a in keep if a.startswith("sm_")], [a for a in keep if a.startswith("compute_")]


def _order(name: str) -> tuple[int, str]:
    digits = name.rstrip("af")
    return int(digits), name[len(digits) :]


def _fatbin_range(mem: mmap.mmap) -> tuple[int, int]:
    """Offset and end of the .nv_fatbin section of an ELF64 little-endian file, x86_64 or aarch64 alike (any
    e_machine: the layout does not depend on it); the whole file for anything else (an nvcc -fatbin output)."""
    if mem[:4] != b"\x7fELF" or mem[4] != 2 or mem[5] != 1:  # EI_CLASS 64-bit, EI_DATA little-endian
        return 0, len(mem)
    (shoff,) = struct.unpack_from("<Q", mem, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", mem, 0x3A)
    (strtab_off,) = struct.unpack_from("<Q", mem, shoff + shstrndx * shentsize + 0x18)
    for index in range(shnum):
        base = shoff + index * shentsize
        (name_off,) = struct.unpack_from("<I", mem, base)
        end = mem.find(b"\0", strtab_off + name_off)
        if mem[strtab_off + name_off : end] == b".nv_fatbin":
            offset, size = struct.unpack_from("<QQ", mem, base + 0x18)
            return offset, offset + size
    return 0, 0


def code_list(path: str) -> CodeList:
    found = CodeList()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mem:
        start, end = _fatbin_range(mem)
        pos = mem.find(_MAGIC, start, end)
        while pos != -1:
            _, version, header_size, total = _HEADER.unpack_from(mem, pos)
            if version != 1 or header_size != _HEADER.size or pos + header_size + total > end:
                pos = mem.find(_MAGIC, pos + 4, end)
                continue
            _read_entries(mem, pos + header_size, pos + header_size + total, found)
            pos = mem.find(_MAGIC, pos + header_size + total, end)
    return found


def _read_entries(mem: mmap.mmap, entry: int, stop: int, found: CodeList) -> None:
    while entry + _ENTRY.size <= stop:
        kind, _, header_size, payload, _, _, _, _, arch = _ENTRY.unpack_from(mem, entry)
        if header_size < _ENTRY.size or kind not in (_KIND_PTX, _KIND_ELF):
            return
        flags = 0
        if header_size >= _FLAGS_OFFSET + _FLAGS.size:
            (flags,) = _FLAGS.unpack_from(mem, entry + _FLAGS_OFFSET)
        name = f"{arch}{'a' if flags & _ARCH_SPECIFIC else ''}"
        (found.ptx if kind == _KIND_PTX else found.sass).add(name)
        label = f"{'compute' if kind == _KIND_PTX else 'sm'}_{name}"
        found.counts[label] = found.counts.get(label, 0) + 1
        entry += header_size + payload
