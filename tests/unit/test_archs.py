"""GPU architecture spellings (sm_89, 8.9, 89, sm_90a, 120) and the matrix's known set."""

from __future__ import annotations

import pytest
from matrix_kit import real

from builder.core.archs import Arch, arch_from, parse_arch
from builder.core.errors import UsageError
from builder.resolve.query import known_arch


@pytest.mark.parametrize("text", ["sm_89", "sm89", "SM_89", "8.9", "89", "compute_89", " sm_89 "])
def test_spellings_of_ada(text: str) -> None:
    assert parse_arch(text) == Arch(8, 9)


@pytest.mark.parametrize(
    ("text", "arch"),
    [
        ("sm_90a", Arch(9, 0, "a")),
        ("9.0a", Arch(9, 0, "a")),
        ("90a", Arch(9, 0, "a")),
        ("sm_100f", Arch(10, 0, "f")),
        ("120", Arch(12, 0)),
        ("12.0", Arch(12, 0)),
        ("sm_121", Arch(12, 1)),
        ("3.7", Arch(3, 7)),
    ],
)
def test_spellings(text: str, arch: Arch) -> None:
    assert parse_arch(text) == arch


def test_names_and_spellings_of_an_arch_specific_target() -> None:
    arch = parse_arch("sm_90a")
    assert (arch.name, arch.cc, arch.cmake, str(arch)) == ("sm_90a", "9.0a", "90a", "sm_90a")
    assert arch.base == Arch(9, 0)
    assert arch.key == (9, 0)


def test_arch_order_follows_compute_capability() -> None:
    assert sorted([Arch(12, 0), Arch(8, 9), Arch(10, 0), Arch(8, 6), Arch(9, 0, "a"), Arch(9, 0)]) == [
        Arch(8, 6),
        Arch(8, 9),
        Arch(9, 0),
        Arch(9, 0, "a"),
        Arch(10, 0),
        Arch(12, 0),
    ]


@pytest.mark.parametrize("text", ["sm_", "abc", "", "0.5", "sm_8.9.1", "sm_89b", "1234", "sm-89x"])
def test_malformed_archs(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_arch(text)
    assert str(exc.value) == f"--arch: {text!r} is not a GPU architecture (examples: sm_89, 8.9, sm_90a)"
    with pytest.raises(ValueError, match="is not a GPU architecture"):
        arch_from(text)


def test_well_formed_but_unknown_arch_is_refused_with_a_suggestion() -> None:
    assert parse_arch("sm_999") == Arch(99, 9)  # syntactically fine ...
    with pytest.raises(UsageError) as exc:
        known_arch(real(), "sm_999")  # ... but not a GPU architecture the matrix knows
    message = str(exc.value)
    assert message.startswith("--arch: 'sm_999' is not a GPU architecture in the matrix (did you mean 'sm_90'?)")
    assert "sm_35" in message and "sm_121" in message


@pytest.mark.parametrize("text", ["sm_89", "8.9", "89", "sm_90a", "120", "sm_121", "3.7"])
def test_real_matrix_knows_these(text: str) -> None:
    assert known_arch(real(), text) == parse_arch(text)
