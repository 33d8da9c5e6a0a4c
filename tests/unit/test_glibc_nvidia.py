"""glibc-os over the NVIDIA wheels torch's pins install ([[nvidia_wheel]]: cuDNN, NCCL, the cuda-toolkit components),
not only torch's own tag. No recorded NVIDIA wheel needs more glibc than torch's manylinux_2_28 today (cuDNN 9.x cu13
and NCCL 2.32 are manylinux_2_27), so a planted floor shows the rule fail, and the real matrix that it still passes
wherever torch's tag does."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from matrix_kit import combo, fake_os, query, real
from packaging.version import Version

from builder.core.errors import MatrixError
from builder.core.kinds import Platform
from builder.core.resources import default_matrix_path
from builder.matrix.loader import load_matrix
from builder.matrix.model import Matrix, NvidiaWheel
from builder.resolve import nvidia_wheels
from builder.resolve.facts import Facts
from builder.resolve.query import Query
from builder.resolve.resolver import lookup
from builder.resolve.rules import rule_glibc_os
from builder.resolve.rules.check import Check, Status

M = real()
SOURCES = ("manylinux", "pypi-torch", "pypi-nvidia-wheels")


def planted(m: Matrix, package: str, version: str, glibc: str, via: str = "") -> Matrix:
    """The matrix with one more NVIDIA wheel release whose tags need this glibc (put first, so it is the one read)."""
    floor = glibc.replace(".", "_")
    wheel = NvidiaWheel(
        package=package,
        versions=(Version(version),),
        platform_tags=(f"manylinux_{floor}_x86_64", f"manylinux_{floor}_aarch64"),
        via=via,
        note="",
        sources=("pypi-nvidia-wheels",),
    )
    return replace(m, nvidia_wheels=(wheel, *m.nvidia_wheels))


def test_a_planted_nccl_floor_above_debian12s_glibc_fails_the_rule_on_both_platforms() -> None:
    m = planted(M, "nvidia-nccl-cu13", "2.30.7", "2.39")
    amd = rule_glibc_os(Facts(m), Query(), combo(m, "2.14.1", "cu130"))
    assert amd == Check(
        "glibc-os",
        False,
        "debian12 glibc 2.36 < 2.39 (torch manylinux_2_28_x86_64; highest NVIDIA wheel: nvidia-nccl-cu13==2.30.7 "
        "manylinux_2_39_x86_64)",
        SOURCES,
    )
    arm = rule_glibc_os(Facts(m), Query(), combo(m, "2.14.1", "cu130", platform="linux/arm64"))
    assert arm.status is Status.FAIL and arm.reason.endswith("nvidia-nccl-cu13==2.30.7 manylinux_2_39_aarch64)")
    newer = replace(combo(m, "2.14.1", "cu130"), os=fake_os("trixie", "2.41"))
    assert rule_glibc_os(Facts(m), Query(), newer).status is Status.PASS


def test_a_planted_cuda_toolkit_floor_names_the_component_that_sets_it() -> None:
    m = planted(M, "cuda-toolkit", "13.2.2", "2.38", via="nvidia-cusolver")
    found = rule_glibc_os(Facts(m), Query(), combo(m, "2.15.0", "cu132"))
    assert found.status is Status.FAIL
    assert "highest NVIDIA wheel: cuda-toolkit==13.2.2 (nvidia-cusolver) manylinux_2_38_x86_64" in found.reason


def test_lookup_rules_out_the_combinations_a_planted_floor_refuses_and_keeps_the_rest() -> None:
    m = planted(M, "nvidia-cudnn-cu13", "9.24.0.43", "2.37")  # above debian12 (2.36) and ubuntu22.04 (2.35)
    found = lookup(m, query(m, torch="2.14.1", variant="cu130"))
    assert found.valid and {r.combo.os.name for r in found.valid} <= {
        o.name for o in m.os if o.glibc >= Version("2.37")
    }
    refused = [r for r in found.rejected if r.first_failure is not None and r.first_failure.rule == "glibc-os"]
    assert {r.combo.os.name for r in refused} >= {"debian12", "ubuntu22.04"}


def test_on_the_real_matrix_the_nvidia_wheels_never_decide_the_rule() -> None:
    """Every combination's glibc-os verdict is the one torch's own tag gives, and none is refused over an NVIDIA
    wheel: the recorded floors are at most manylinux_2_27."""
    facts = Facts(M)
    bare = Facts(replace(M, nvidia_wheels=()))
    checked = 0
    for release in M.torch:
        for variant in release.variants:
            for build in variant.builds:
                for base in M.os:
                    c = replace(combo(M, str(release.version), variant.name), os=base, platform=build.platform)
                    with_nvidia, torch_only = rule_glibc_os(facts, Query(), c), rule_glibc_os(bare, Query(), c)
                    assert with_nvidia.ok == torch_only.ok, c.id
                    checked += bool(nvidia_wheels.installed(M, variant, build.platform))
    assert checked > 0


def test_the_real_pins_of_a_cuda_13_variant_are_found_on_both_platforms() -> None:
    v = combo(M, "2.14.1", "cu130").variant
    labels = [(w.label, w.tag) for w in nvidia_wheels.installed(M, v, Platform.ARM64)]
    assert labels == [
        ("nvidia-cudnn-cu13==9.24.0.43", "manylinux_2_27_aarch64"),
        ("nvidia-nccl-cu13==2.30.7", "manylinux_2_18_aarch64"),
        ("cuda-toolkit==13.0.3 (nvidia-cusolver)", "manylinux_2_27_aarch64"),
    ]
    found = rule_glibc_os(Facts(M), Query(), combo(M, "2.14.1", "cu130"))
    assert found.reason == (
        "debian12 glibc 2.36 >= 2.28 (torch manylinux_2_28_x86_64; highest NVIDIA wheel: nvidia-cudnn-cu13==9.24.0.43 "
        "manylinux_2_27_x86_64)"
    )
    # a CUDA 12 variant's wheels are not recorded: torch's tag alone, as before
    old = rule_glibc_os(Facts(M), Query(), combo(M, "2.5.1", "cu124"))
    assert old.reason == "debian12 glibc 2.36 >= 2.5 (manylinux1_x86_64)" and old.sources == SOURCES[:2]


def test_the_new_releases_on_pypi_are_recorded() -> None:
    tags = {(w.package, str(v)): w.platform_tags for w in M.nvidia_wheels for v in w.versions}
    assert tags["nvidia-nccl-cu13", "2.32.6"] == ("manylinux_2_27_x86_64", "manylinux_2_27_aarch64")
    assert tags["nvidia-nccl-cu13", "2.30.7"] == ("manylinux_2_18_x86_64", "manylinux_2_18_aarch64")
    assert tags["nvidia-cudnn-cu13", "9.28.1.4"] == ("manylinux_2_27_x86_64", "manylinux_2_27_aarch64")
    assert {"13.4.3", "13.5.0"} <= {str(c.version) for c in M.cuda}
    assert all(c.min_driver is None for c in M.cuda if str(c.version) in ("13.4.3", "13.5.0"))  # not recorded


_NCCL = '[[nvidia_wheel]]\npackage = "nvidia-nccl-cu13"\nversions = ["2.28.9", "2.29.7", "2.30.7"]\n'


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (
            _NCCL + 'platform_tags = ["musllinux_1_2_x86_64"]\n',
            "nvidia_wheel[nvidia-nccl-cu13].platform_tags: 'musllinux_1_2_x86_64' is not a manylinux tag of x86_64 "
            "or aarch64 wheels",
        ),
        (
            _NCCL + 'platform_tags = ["manylinux_2_18_x86_64", "manylinux2014_x86_64"]\n',
            "nvidia_wheel[nvidia-nccl-cu13].platform_tags: expected one tag per machine (x86_64, aarch64)",
        ),
        (
            '[[nvidia_wheel]]\npackage = "nvidia-nccl-cu13"\nversions = ["2.28.9", "2.32.6"]\n'
            'platform_tags = ["manylinux_2_18_x86_64", "manylinux_2_18_aarch64"]\n',
            "nvidia_wheel[nvidia-nccl-cu13].versions: 2.32.6 is also at line",
        ),
    ],
)
def test_a_bad_nvidia_wheel_entry_is_one_located_line(tmp_path: Path, new: str, message: str) -> None:
    text = default_matrix_path().read_text()
    old = _NCCL + 'platform_tags = ["manylinux_2_18_x86_64", "manylinux_2_18_aarch64"]\n'
    assert text.count(old) == 1
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace(old, new))
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    assert str(err.value).split(": ", 1)[1].startswith(message)
