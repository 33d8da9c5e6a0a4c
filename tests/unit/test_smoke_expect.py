"""builder/smoke/expect.py (manifest + flags) and the binary-compatibility verdict of checks_cpu."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_torch import manifest

from builder.smoke.checks_cpu import verdict
from builder.smoke.expect import Expectations, arch_key, cudnn_number, load, public
from builder.smoke.framework import Failed

NO_FLAGS: dict[str, str | None] = {"torch": None, "cudnn": None}


def write(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_manifest_gives_every_expectation(tmp_path: Path) -> None:
    path = write(tmp_path, manifest(flavor="devel", arch_list=["sm_89", "sm_90"], extensions=["addone"]))
    found = load(path, NO_FLAGS)
    assert found == Expectations(
        torch="2.14.1+cu130",
        torchvision="0.29.1",
        torchaudio="2.11.1",
        cuda="13.0",
        cudnn="9.24.0.43",
        nccl="2.30.7",
        python=str(manifest()["python"]),
        os=str(manifest()["os"]),
        flavor="devel",
        arch_list=("sm_89", "sm_90"),
        min_driver="580.65.06",
        extensions=("addone",),
        source=path,
    )
    assert found.cpu_build is False


def test_flags_override_the_manifest_and_the_source_stays_the_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, manifest())
    found = load(path, {"cudnn": "9.1.0.70", "torch": None})
    assert (found.cudnn, found.torch, found.source) == ("9.1.0.70", "2.14.1+cu130", path)


def test_flags_alone() -> None:
    found = load(None, {"torch": "2.5.1+cpu", "cudnn": None})
    assert found == Expectations(torch="2.5.1+cpu", source="flags")
    assert found.cpu_build is True


def test_nothing_at_all() -> None:
    assert load(None, NO_FLAGS) == Expectations(source="none")


def test_null_and_odd_values_in_a_manifest(tmp_path: Path) -> None:
    # a CPU image's manifest: no CUDA; numbers become strings; a non-list arch_list means none
    path = write(tmp_path, {"torch": "2.5.1+cpu", "cuda": None, "python": 3.11, "arch_list": "sm_89"})
    found = load(path, NO_FLAGS)
    assert (found.cuda, found.python, found.arch_list, found.cpu_build) == (None, "3.11", (), True)


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.11.1+cu132", "2.11.1"), ("0.20.1", "0.20.1"), ("2.5.1+cpu", "2.5.1"), ("1.0+a+b", "1.0")],
)
def test_public(version: str, expected: str) -> None:
    assert public(version) == expected


@pytest.mark.parametrize(
    ("version", "number"),
    [
        ("9.24.0.43", 92400),  # cuDNN 9: major * 10000 + minor * 100 + patch
        ("9.1.0.70", 90100),
        ("9.10.2.21", 91002),
        ("8.9.7.29", 8907),  # cuDNN 8: major * 1000 + minor * 100 + patch
        ("8.7.0.84", 8700),
        ("8.9.2", 8902),
    ],
)
def test_cudnn_number(version: str, number: int) -> None:
    assert cudnn_number(version) == number


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("sm_89", (8, 9)),
        ("compute_90", (9, 0)),
        ("sm_100", (10, 0)),
        ("sm_120", (12, 0)),
        ("sm_90a", (9, 0)),
        ("sm_100f", (10, 0)),
        ("sm89", None),
        ("gfx90a", None),
        ("sm_8", None),
    ],
)
def test_arch_key(name: str, key: tuple[int, int] | None) -> None:
    assert arch_key(name) == key


@pytest.mark.parametrize(
    ("target", "sass", "ptx", "expected"),
    [
        ("sm_89", ["sm_80", "sm_89"], [], ("native", "sm_89")),
        ("sm_89", ["sm_80", "sm_86"], [], ("compatible", "sm_86")),  # same major, the highest lower minor
        ("sm_86", ["sm_80", "sm_89"], [], ("compatible", "sm_80")),  # never a higher minor
        ("sm_100", ["sm_90"], [], ("none", "")),  # SASS never crosses a major
        ("sm_100", ["sm_90"], ["compute_90"], ("ptx", "compute_90")),
        ("sm_120", ["sm_80", "sm_90"], ["compute_90"], ("ptx", "compute_90")),  # the driver JIT-compiles PTX
        ("sm_120", [], ["compute_80", "compute_90", "compute_121"], ("ptx", "compute_90")),  # highest not above
        ("sm_75", ["sm_80"], ["compute_80"], ("none", "")),  # PTX never runs on an older arch
        ("sm_90", ["sm_90"], ["compute_90"], ("native", "sm_90")),  # SASS wins over PTX
        ("sm_121", ["sm_120"], ["compute_120"], ("compatible", "sm_120")),
    ],
)
def test_verdict(target: str, sass: list[str], ptx: list[str], expected: tuple[str, str]) -> None:
    assert verdict(target, sass, ptx) == expected


def test_verdict_rejects_a_name_that_is_not_an_architecture() -> None:
    with pytest.raises(Failed, match=r"'8\.9' is not an architecture name like sm_89"):
        verdict("8.9", ["sm_89"], [])
