"""Arch-specific code (sm_90a ...): how the .nv_fatbin reader names it and what it runs on."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from fatbin_kit import ELF, ENTRY_HEADER, MAGIC, shared_library

from builder.smoke.checks_cpu import verdict
from builder.smoke.fatbin import code_list


def _entry(arch: int, flags: int) -> bytes:
    head = struct.pack("<HHIQIIHHI", ELF, 0x0101, ENTRY_HEADER, 8, 0, 0, 1, 7, arch)
    head = head.ljust(0x28, b"\0") + struct.pack("<Q", flags)
    return head.ljust(ENTRY_HEADER, b"\0") + b"\0" * 8


def test_entries_flagged_arch_specific_are_named_with_the_a_suffix(tmp_path: Path) -> None:
    body = _entry(90, 0) + _entry(90, 0x100000) + _entry(121, 0x100000)
    library = tmp_path / "lib.so"
    library.write_bytes(shared_library(struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body))
    assert code_list(str(library)).names() == (["sm_90", "sm_90a", "sm_121a"], [])


@pytest.mark.parametrize(
    ("target", "sass", "expected"),
    [
        ("sm_90a", ["sm_90"], ("none", "")),  # an sm_90a build needs its arch-specific code
        ("sm_90a", ["sm_90a"], ("native", "sm_90a")),
        ("sm_90", ["sm_90a"], ("native", "sm_90a")),  # sm_90a code runs on an sm_90 GPU
        ("sm_121", ["sm_120a"], ("none", "")),  # arch-specific code is not forward compatible
        ("sm_121", ["sm_120a", "sm_120"], ("compatible", "sm_120")),
    ],
)
def test_arch_specific_code_runs_only_on_its_own_gpu(target: str, sass: list[str], expected: tuple[str, str]) -> None:
    assert verdict(target, sass, []) == expected
