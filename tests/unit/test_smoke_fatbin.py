"""builder/smoke/fatbin.py on synthetic fat binaries built byte by byte (tests/unit/fatbin_kit.py).

The reader was also compared by hand with cuobjdump on real libraries from a built image; the
result is recorded in docs/smoke.md ("The .nv_fatbin reader"), not committed as a binary.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fatbin_kit import AARCH64, ELF, PTX, Entry, container, elf64, entry, ptx, raw_container, sass, shared_library

from builder.smoke.fatbin import code_list


def names(tmp_path: Path, data: bytes) -> tuple[list[str], list[str]]:
    path = tmp_path / "lib.so"
    path.write_bytes(data)
    return code_list(str(path)).names()


def test_one_container_with_sass_and_ptx(tmp_path: Path) -> None:
    data = shared_library(container(*sass(86, 80), *ptx(90)))
    assert names(tmp_path, data) == (["sm_80", "sm_86"], ["compute_90"])


def test_entries_of_every_container_are_merged_and_sorted_numerically(tmp_path: Path) -> None:
    data = shared_library(container(*sass(120, 90)), container(*sass(100, 89), *ptx(120)))
    assert names(tmp_path, data) == (["sm_89", "sm_90", "sm_100", "sm_120"], ["compute_120"])


def test_payload_sizes_are_followed_to_the_next_entry(tmp_path: Path) -> None:
    # A payload of odd length that itself contains the container magic must not derail the walk.
    tricky = b"\x50\xed\x55\xba" + b"x" * 37
    data = shared_library(container(Entry(ELF, 75, tricky), Entry(PTX, 75, b"y" * 3), Entry(ELF, 90)))
    assert names(tmp_path, data) == (["sm_75", "sm_90"], ["compute_75"])


def test_a_container_with_a_bad_version_is_skipped_and_the_next_one_read(tmp_path: Path) -> None:
    data = shared_library(container(*sass(70), version=2), container(*sass(89)))
    assert names(tmp_path, data) == (["sm_89"], [])


def test_a_container_claiming_more_bytes_than_the_section_has_is_skipped(tmp_path: Path) -> None:
    data = shared_library(container(*sass(89)), container(*sass(90), extra_size=4096))
    assert names(tmp_path, data) == (["sm_89"], [])


def test_only_the_nv_fatbin_section_is_read(tmp_path: Path) -> None:
    # A container in another section (host data that happens to look like one) is not GPU code.
    data = shared_library(container(*sass(89)), rodata=container(*sass(52)))
    assert names(tmp_path, data) == (["sm_89"], [])


def test_an_elf_file_without_nv_fatbin_has_no_gpu_code(tmp_path: Path) -> None:
    data = elf64({".rodata": container(*sass(89)), ".text": b"\x90" * 16})
    assert names(tmp_path, data) == ([], [])


def test_a_bare_fatbin_file_is_read_whole(tmp_path: Path) -> None:
    # what `nvcc -fatbin` writes (the devel.nvcc check reads one)
    assert names(tmp_path, container(*sass(89), *ptx(89))) == (["sm_89"], ["compute_89"])


@pytest.mark.parametrize("noise", [b"", b"\0" * 64, b"no fat binary here"])
def test_files_without_containers(tmp_path: Path, noise: bytes) -> None:
    assert names(tmp_path, shared_library(noise)) == ([], [])


ARCH_SPECIFIC = 0x100000


@pytest.mark.parametrize(
    ("header", "expected"), [(48, ["sm_80", "sm_90a"]), (64, ["sm_80", "sm_90a"]), (40, ["sm_80", "sm_90"])]
)
def test_the_arch_specific_flag_is_read_from_a_header_of_48_bytes_or_more(
    tmp_path: Path, header: int, expected: list[str]
) -> None:
    # The flag field ends at byte 48 (0x28 + 8): a header of exactly 48 bytes carries it; one of 40 cannot.
    body = entry(Entry(ELF, 90), header=header, flags=ARCH_SPECIFIC) + entry(Entry(ELF, 80), header=header)
    assert names(tmp_path, shared_library(raw_container(body))) == (expected, [])


def test_an_aarch64_library_is_read_like_an_x86_64_one(tmp_path: Path) -> None:
    # GH200 / GB200 / DGX Spark: libtorch_cuda.so for aarch64 is ELF64 little-endian with e_machine 183.
    arm = shared_library(container(*sass(90, 100, 120), *ptx(120)), machine=AARCH64)
    assert arm[18:20] == b"\xb7\x00"  # e_machine = EM_AARCH64
    assert names(tmp_path, arm) == (["sm_90", "sm_100", "sm_120"], ["compute_120"])
    body = entry(Entry(ELF, 100), header=64, flags=ARCH_SPECIFIC) + entry(
        Entry(ELF, 121), header=64, flags=ARCH_SPECIFIC
    )
    assert names(tmp_path, shared_library(raw_container(body), machine=AARCH64)) == (["sm_100a", "sm_121a"], [])


def test_a_big_endian_or_32_bit_elf_file_is_not_taken_for_a_fat_binary_layout(tmp_path: Path) -> None:
    # Only ELF64 little-endian has the section layout the reader follows; anything else is searched whole.
    data = bytearray(shared_library(container(*sass(89))))
    data[5] = 2  # EI_DATA = big-endian: its section header offset, read as little-endian, points nowhere
    data[0x28:0x30] = (1 << 40).to_bytes(8, "big")
    assert names(tmp_path, bytes(data)) == (["sm_89"], [])
