"""explain's three answers word for word, lookup's order between Pythons, an inference question's rules, and
first_valid's shortcuts: its caches kept per matrix, the releases and variants it leaves unevaluated (written for
the survivors of mutmut on builder/resolve/resolver.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from matrix_kit import BASE, combo, edit, query, real, small
from packaging.version import Version

from builder.resolve import resolver
from builder.resolve.combos import Combination, enumerate_combinations
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.resolver import Explanation, Result, explain, first_valid, lookup
from builder.resolve.rules import RULES, VARIANT_RULES, Check

M = real()
S = small()
# The small matrix with a second release (its one variant is no CUDA 12.0 build either).
TWO = small(
    BASE
    + """
[[torch]]
version = "2.6.0"
released = "2025-01"
pypi_default = "cu124"
python = ["3.11"]
platform_tag = "manylinux1_x86_64"
torchvision = "0.20.1"
torchaudio = "2.5.1"
source = "pypi"

[[torch.variants]]
name = "cu124"
cuda = "12.4"
cudnn = "9.1.0.70"
sass = ["8.6", "9.0"]
source = "pypi"
"""
)


# --- explain --------------------------------------------------------------------------------------------------


def test_explain_with_valid_combinations_is_lookups_first_row_whole() -> None:
    q = query(S, driver="550", gpu="RTX 4090")
    best = lookup(S, q).valid[0]
    assert explain(S, q) == Explanation(
        "torch2.5.1-cu124-py3.11-debian12",
        ("the best of 4 valid combinations for these flags (lookup's first row)",),
        best.checks,
        best,
    )


def test_explain_with_no_combination_joins_every_filter_note() -> None:
    assert explain(TWO, query(TWO, cuda="12.0")) == Explanation(
        "none",
        ("no combination matches the flags",),
        (
            Check(
                "selection",
                False,
                "torch 2.5.1 publishes cu118, cu124, cpu: none matches the --cuda/--variant asked; "
                "torch 2.6.0 publishes cu124: none matches the --cuda/--variant asked",
                ("pytorch-variants",),
            ),
        ),
        None,
    )


@pytest.mark.parametrize(
    ("flags", "nearest", "ruled_out", "failing", "rules"),
    [
        # cuDNN 9.1 starts at sm_50 in every build; cu124 also has no sm_37 code, and CUDA 12 dropped it
        ({"gpu": "Tesla K80", "driver": "550"}, "torch2.5.1-cu118-py3.11-debian12", 4, "1 rule", ["cudnn-arch"]),
        (
            {"variant": "cu124", "driver": "520"},
            "torch2.5.1-cu124-py3.11-debian12",
            2,
            "2 rules",
            ["driver-cuda", "cudnn-cuda"],
        ),
        (
            {"variant": "cu124", "gpu": "Tesla K80"},
            "torch2.5.1-cu124-py3.11-debian12",
            2,
            "3 rules",
            ["arch-torch", "arch-cuda", "cudnn-arch"],
        ),
    ],
)
def test_explain_without_a_valid_combination_names_the_nearest_and_counts_its_failures(
    flags: dict[str, str], nearest: str, ruled_out: int, failing: str, rules: list[str]
) -> None:
    q = query(S, **flags)
    found = next(r for r in lookup(S, q).rejected if r.combo.id == nearest)
    e = explain(S, q)
    assert e == Explanation(
        nearest,
        (f"no valid combination for these flags ({ruled_out} ruled out); the nearest candidate, failing {failing}",),
        found.checks,
        found,
    )
    assert [c.rule for c in e.checks if not c.ok] == rules


# --- lookup's ranking ----------------------------------------------------------------------------------------


def test_lookup_ranks_the_os_python_first_then_the_newest() -> None:
    two_images = small(edit(BASE, 'python_images = ["3.12"]', 'python_images = ["3.12", "3.13"]'))
    assert [r.combo.id for r in lookup(two_images, query(two_images, variant="cu124")).valid] == [
        "torch2.5.1-cu124-py3.11-debian12",
        "torch2.5.1-cu124-py3.13-debian12",
        "torch2.5.1-cu124-py3.12-debian12",
    ]


def test_an_inference_question_adds_the_onnxruntime_rule_to_every_other() -> None:
    found = resolver.evaluate(Facts(M), query(M, inference=True), combo(M, "2.14.1", "cu130"))
    assert [c.rule for c in found.checks] == [rule(Facts(M), Query(), found.combo).rule for rule in RULES]
    assert [c.rule for c in found.checks][-6:] == [
        "python-torch",
        "python-os",
        "glibc-os",
        "companions",
        "onnxruntime",
        "onnxruntime-arch",
    ]


# --- first_valid ----------------------------------------------------------------------------------------------


def test_first_valid_of_a_release_with_one_combination() -> None:
    q = query(S, variant="cu124", python="3.11")
    assert [c.id for c in enumerate_combinations(S, q)] == ["torch2.5.1-cu124-py3.11-debian12"]
    found = first_valid(S, q)
    assert found is not None and found == lookup(S, q).valid[0]


def test_first_valid_keeps_the_combination_checks_of_each_matrix_apart() -> None:
    """The combination rules' checks are shared between queries on one matrix, never between matrices, even
    when they share the torch releases (a replace()d matrix does) and the OS names."""
    old_glibc = replace(S, os=(replace(S.os[0], glibc=Version("2.4")),))
    assert old_glibc.torch is S.torch
    q = query(S, variant="cu124", python="3.11")
    assert first_valid(S, q) is not None
    assert first_valid(old_glibc, q) is None
    assert [r.first_failure for r in lookup(old_glibc, q).rejected] == [
        Check("glibc-os", False, "debian12 glibc 2.4 < 2.5 (manylinux1_x86_64)", ("manylinux", "pypi-torch"))
    ]


def _evaluated(monkeypatch: pytest.MonkeyPatch) -> list[Combination]:
    """The combinations first_valid evaluates (every rule), in order."""
    seen: list[Combination] = []
    evaluate = resolver.evaluate

    def counting(f: Facts, q: Query, c: Combination, cache: resolver._Cache | None = None) -> Result:
        seen.append(c)
        return evaluate(f, q, c, cache)

    monkeypatch.setattr(resolver, "evaluate", counting)
    return seen


def test_first_valid_evaluates_no_older_release_when_the_newest_has_an_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q = query(M)
    newest = max(t.version for t in M.torch)
    seen = _evaluated(monkeypatch)
    found = first_valid(M, q)
    assert found is not None and found.combo.torch.version == newest
    assert seen and {c.torch.version for c in seen} == {newest}
    monkeypatch.undo()
    assert found == lookup(M, q).valid[0]


def test_first_valid_evaluates_no_combination_whose_variant_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Driver 470 runs no CUDA 12 build: those variants fail their variant rules and are never evaluated, back to
    the release whose cu118 build it runs."""
    q = query(M, driver="470")
    seen = _evaluated(monkeypatch)
    found = first_valid(M, q)
    # torchvision 0.20.1 takes no Python 3.13: the OS inside its regular support with its own Python
    assert found is not None and found.combo.id == "torch2.5.1-cu118-py3.10-ubuntu22.04"
    f = Facts(M)
    assert seen and all(rule(f, q, c).ok for c in seen for rule in VARIANT_RULES)
    releases = {id(c.torch) for c in seen}
    screened = [c for c in enumerate_combinations(M, q) if id(c.torch) in releases and c not in seen]
    assert any(not rule(f, q, c).ok for c in screened for rule in VARIANT_RULES)
    assert combo(M, "2.5.1", "cu121") in screened
