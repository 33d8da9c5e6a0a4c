"""Version value types and parsers: releases, NVIDIA drivers (branch semantics), version specs."""

from __future__ import annotations

import pytest
from packaging.version import Version

from builder.core.errors import UsageError
from builder.core.versions import Driver, minor_of, minor_str, parse_driver, parse_release, parse_spec, release
from builder.resolve.query import _cuda_spec


@pytest.mark.parametrize("text", ["2.5.1", "12.4", "9.1.0.70", "13"])
def test_release_accepts_dotted_versions(text: str) -> None:
    assert str(release(text)) == text


@pytest.mark.parametrize("text", ["2.5.1+cu124", "2.5.1rc1", "v2.5", "2.5.", "", "1.2.3.4.5", "2.x"])
def test_release_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a dotted version like 2\.5\.1$"):
        release(text)


def test_parse_release_names_the_flag() -> None:
    with pytest.raises(UsageError) as exc:
        parse_release("2.x", "--torch")
    assert str(exc.value) == "--torch: '2.x' is not a dotted version like 2.5.1"


def test_minor_of_pads_a_bare_major() -> None:
    assert minor_of(Version("12")) == (12, 0)
    assert minor_of(Version("12.4.1")) == (12, 4)
    assert minor_str(Version("13.0.2")) == "13.0"


# --- drivers -----------------------------------------------------------------------------------------


def test_full_driver_keeps_its_spelling() -> None:
    d = parse_driver("580.65.06")
    assert d == Driver(parts=(580, 65, 6), exact=True)
    assert str(d) == "580.65.06"  # leading zero kept, as nvidia-smi prints it
    assert d.describe() == "580.65.06"
    assert d.branch == 580


def test_bare_branch_is_not_exact() -> None:
    d = parse_driver("535")
    assert not d.exact
    assert d.branch == 535
    assert d.describe() == "535 (any 535.x, read as the newest)"


def test_driver_components_compare_numerically() -> None:
    # 570.26 (12.8 GA) is older than 570.124.06 (12.8 Update 1): compare numbers, not strings.
    assert not parse_driver("570.26").at_least(parse_driver("570.124.06"))
    assert parse_driver("570.124.06").at_least(parse_driver("570.26"))
    assert parse_driver("550.54.15").at_least(parse_driver("550.54.14"))
    assert not parse_driver("550.54.14").at_least(parse_driver("550.54.15"))
    assert parse_driver("616.00").at_least(parse_driver("616.0.0"))


def test_a_bare_branch_meets_every_floor_of_its_branch() -> None:
    # "535" is read as the newest 535 driver: it meets 535.104.05 (12.2 Update 2) ...
    assert parse_driver("535").at_least(parse_driver("535.104.05"))
    # ... and every older branch's floor, but no newer branch's.
    assert parse_driver("535").at_least(parse_driver("525.60.13"))
    assert not parse_driver("535").at_least(parse_driver("545.23.06"))


@pytest.mark.parametrize("text", [" 550.54.15 ", "550.54.15"])
def test_driver_is_stripped(text: str) -> None:
    assert parse_driver(text).parts == (550, 54, 15)


@pytest.mark.parametrize("text", ["abc", "53", "5350", "535.1.2.3", "535.", "r535", "535.54.1234", ""])
def test_malformed_drivers(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_driver(text)
    assert str(exc.value) == (
        f"--driver: {text.strip()!r} is not an NVIDIA driver version (examples: 535, 550.54.15, 570.124.06)"
    )


# --- specs -------------------------------------------------------------------------------------------


def test_a_minor_spec_means_every_patch_of_it() -> None:
    spec = parse_spec("2.5", "--torch")
    assert Version("2.5.0") in spec and Version("2.5.1") in spec
    assert Version("2.6.0") not in spec and Version("2.50.0") not in spec


def test_a_full_version_spec_is_exact() -> None:
    spec = parse_spec("2.5.1", "--torch")
    assert Version("2.5.1") in spec
    assert Version("2.5.0") not in spec


def test_a_major_spec() -> None:
    spec = parse_spec("12", "--cuda")
    assert Version("12.0") in spec and Version("12.9") in spec
    assert Version("13.0") not in spec


def test_range_specs() -> None:
    spec = parse_spec(">=2.4,<2.7", "--torch")
    assert [str(v) for v in map(Version, ["2.3.1", "2.4.0", "2.6.0", "2.7.0"]) if v in spec] == ["2.4.0", "2.6.0"]
    assert Version("3.11") in parse_spec("~=3.10", "--python")


@pytest.mark.parametrize("text", [">>2", "latest", "2.5.x", ">=2.5.1+cu124", "=2.5", ">=", "2.5,<3"])
def test_malformed_specs(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_spec(text, "--torch")
    assert str(exc.value) == (
        f"--torch: {text!r} is not a version or version range (examples: 2.5, 2.5.1, '>=2.4,<2.7')"
    )


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("cu124", "12.4", "12.6"),
        ("cu130", "13.0", "12.0"),
        ("cu118", "11.8", "11.7"),
        ("12.4", "12.4", "12.1"),
        ("12", "12.8", "13.0"),
        (">=12.4", "12.6", "12.1"),
    ],
)
def test_cuda_spec_accepts_wheel_variant_spelling(text: str, inside: str, outside: str) -> None:
    spec = _cuda_spec(text)
    assert Version(inside) in spec
    assert Version(outside) not in spec


def test_cuda_spec_refuses_garbage() -> None:
    with pytest.raises(UsageError, match=r"^--cuda: 'cuda' is not a version or version range"):
        _cuda_spec("cuda")
