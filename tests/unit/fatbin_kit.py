"""Synthetic fat binaries, built byte by byte: a few hundred bytes stand in for a multi-MB extension.

Layout (what builder/smoke/fatbin.py reads): a container header `<IHHQ` (magic 0xBA55ED50,
version, header size 16, size of the entries that follow), then entries, each a 64-byte header
`<HHIQIIHHI` + padding (kind 1 = PTX / 2 = ELF, -, header size, payload size, -, -, minor, major,
arch) followed by its payload. A shared library carries the containers in its `.nv_fatbin` section;
`elf64` lays out a minimal ELF64 file with a section header table naming that section; `provider` adds the
.dynamic section of a library's DT_NEEDED entries (ONNX Runtime's CUDA provider links libcudart.so.13).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAGIC = 0xBA55ED50
PTX, ELF = 1, 2
ENTRY_HEADER = 64  # what nvcc writes for sm < 100; the reader follows the header-size field


@dataclass(frozen=True)
class Entry:
    kind: int  # PTX or ELF
    arch: int  # 89 for sm_89 / compute_89
    payload: bytes = b"\0" * 8


def entry(item: Entry, header: int = ENTRY_HEADER, flags: int = 0) -> bytes:
    """An entry with a header of `header` bytes; `flags` (the 64-bit field at 0x28) only fits from 48 bytes on."""
    head = struct.pack("<HHIQIIHHI", item.kind, 0x0101, header, len(item.payload), 0, 0, 1, 7, item.arch)
    head = head.ljust(0x28, b"\0")
    if header >= 0x28 + 8:
        head += struct.pack("<Q", flags)
    return head.ljust(header, b"\0")[:header] + item.payload


def raw_container(body: bytes, version: int = 1) -> bytes:
    """A container around entries already laid out (entry(...) with odd header sizes)."""
    return struct.pack("<IHHQ", MAGIC, version, 16, len(body)) + body


def container(*entries: Entry, version: int = 1, extra_size: int = 0) -> bytes:
    """One fat binary container; extra_size claims more bytes than there are (a truncated container)."""
    body = b"".join(entry(e) for e in entries)
    return struct.pack("<IHHQ", MAGIC, version, 16, len(body) + extra_size) + body


def sass(*archs: int) -> list[Entry]:
    return [Entry(ELF, a) for a in archs]


def ptx(*archs: int) -> list[Entry]:
    return [Entry(PTX, a) for a in archs]


X86_64, AARCH64 = 62, 183  # e_machine: the same ELF64 little-endian layout on both


def elf64(sections: dict[str, bytes], machine: int = X86_64) -> bytes:
    """A minimal little-endian ELF64 file: header, section contents, .shstrtab, section headers."""
    names = [*sections, ".shstrtab"]
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    name_offsets, at = [], 1
    for n in names:
        name_offsets.append(at)
        at += len(n) + 1
    blobs = [*sections.values(), strtab]
    body, offsets = b"", []
    for blob in blobs:
        offsets.append(64 + len(body))
        body += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(body)
    header = (
        b"\x7fELF\x02\x01\x01"
        + b"\0" * 9
        + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(blobs) + 1, len(blobs))
    )
    table = b"\0" * 64  # section 0 is always the null section
    for name_off, off, blob in zip(name_offsets, offsets, blobs, strict=True):
        kind = 3 if blob is strtab else 1  # SHT_STRTAB / SHT_PROGBITS
        table += struct.pack("<IIQQQQIIQQ", name_off, kind, 0, 0, off, len(blob), 0, 0, 8, 0)
    return header + body + table


def shared_library(*containers: bytes, rodata: bytes = b"host code and data", machine: int = X86_64) -> bytes:
    """An ELF64 'extension' whose .nv_fatbin section holds the given containers."""
    return elf64({".rodata": rodata, ".nv_fatbin": b"".join(containers)}, machine)


def dynamic(*needed: str) -> dict[str, bytes]:
    """A .dynstr with the names and a .dynamic of DT_NEEDED entries pointing into it, ended by DT_NULL."""
    strings, table = b"\0", b""
    for name in needed:
        table += struct.pack("<qQ", 1, len(strings))
        strings += name.encode() + b"\0"
    return {".dynstr": strings, ".dynamic": table + struct.pack("<qQ", 0, 0) + struct.pack("<qQ", 1, 1)}


def provider(fatbin: bytes, *needed: str, machine: int = X86_64) -> bytes:
    return elf64({".rodata": b"host code", ".nv_fatbin": fatbin, **dynamic(*needed)}, machine)
