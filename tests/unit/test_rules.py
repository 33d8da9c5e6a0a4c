"""Every rule in builder/resolve/rules/, each tested on its own with real cases from compat-facts.md.

Expected values are the published facts (driver floors, wheel arch lists, Python tags), not values
read back from the code; section numbers refer to ../shared/reference/compat-facts.md.
"""

from __future__ import annotations

import pytest
from matrix_kit import BASE, combo, edit, fake_os, query, real, small
from packaging.version import Version

from builder.core.archs import Arch
from builder.core.kinds import Platform
from builder.core.versions import parse_driver
from builder.resolve import rules
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery, parse_query
from builder.resolve.resolver import explain, lookup
from builder.resolve.rules import ArchSupport, DriverMode, arch_support, driver_mode
from builder.resolve.rules.check import Missing, Status

M = real()
F = Facts(M)


def test_the_rule_set_is_the_tested_one() -> None:
    # A new rule must come with its own tests here (and a section in docs/rules.md); onnxruntime's and
    # onnxruntime-arch's are in test_inference.py and test_inference_arch.py.
    names = [rule(F, Query(), combo(M, "2.5.1", "cu124")).rule for rule in rules.RULES]
    assert names == [
        "platform",
        "driver-gpu",
        "driver-cuda",
        "arch-torch",
        "ptx-jit-driver",
        "arch-cuda",
        "cudnn-cuda",
        "cudnn-arch",
        "python-torch",
        "python-os",
        "glibc-os",
        "companions",
        "onnxruntime",
        "onnxruntime-arch",
    ]


# --- driver-cuda (§1a toolkit drivers, §1b minor-version compatibility, §1c forward compatibility) -----


def test_driver_535_runs_cu124_through_minor_version_compatibility() -> None:
    # 535 < 550.54.14 (CUDA 12.4 GA driver) but >= 525.60.13 (the CUDA 12 MVC floor).
    check = rules.rule_driver_cuda(F, query(M, driver="535"), combo(M, "2.5.1", "cu124"))
    assert check.ok
    assert "minor-version compatibility" in check.reason
    assert "550.54.14" in check.reason and "525.60.13" in check.reason
    assert driver_mode(F, query(M, driver="535"), Version("12.4"))[0] is DriverMode.MINOR_VERSION


def test_driver_470_57_02_cannot_run_any_cuda_12_build() -> None:
    check = rules.rule_driver_cuda(F, query(M, driver="470.57.02"), combo(M, "2.5.1", "cu124"))
    assert not check.ok
    assert check.reason == "driver 470.57.02: every CUDA 12 build needs >= 525.60.13"


def test_driver_470_57_02_runs_cuda_11_8_through_minor_version_compatibility() -> None:
    # 470.57.02 >= 450.80.02 (CUDA 11 MVC floor), below 520.61.05 (11.8 GA).
    q = query(M, driver="470.57.02")
    assert rules.rule_driver_cuda(F, q, combo(M, "2.5.1", "cu118")).ok
    assert driver_mode(F, q, Version("11.8"))[0] is DriverMode.MINOR_VERSION


def test_driver_below_the_cuda_11_mvc_floor_is_refused() -> None:
    check = rules.rule_driver_cuda(F, query(M, driver="450.51.06"), combo(M, "2.5.1", "cu118"))
    assert not check.ok
    assert check.reason == "driver 450.51.06: every CUDA 11 build needs >= 450.80.02"


@pytest.mark.parametrize(
    ("driver", "mode"),
    [
        ("550.54.14", DriverMode.FULL),  # the 12.4 GA driver itself
        ("550.54.13", DriverMode.MINOR_VERSION),  # one below it
        ("550", DriverMode.FULL),  # a bare branch is read as its newest driver
        ("525.60.13", DriverMode.MINOR_VERSION),  # exactly the CUDA 12 MVC floor
        ("525.60.12", None),
    ],
)
def test_driver_boundaries_for_cuda_12_4(driver: str, mode: DriverMode | None) -> None:
    assert driver_mode(F, query(M, driver=driver), Version("12.4"))[0] is mode


def test_cuda_10_has_no_minor_version_compatibility() -> None:
    # §1b: MVC was introduced with CUDA 11; 10.2 needs its toolkit driver 440.33.
    mode, reason = driver_mode(F, query(M, driver="418.39"), Version("10.2"))
    assert mode is None
    assert reason == "driver 418.39: CUDA 10.2 needs >= 440.33 (no minor-version compatibility)"
    assert driver_mode(F, query(M, driver="440.33"), Version("10.2"))[0] is DriverMode.FULL


def test_driver_570_cannot_run_a_cu130_build_on_a_geforce() -> None:
    # §1b: a CUDA 13 build needs >= 580 (pytorch#162531: "found version 12080" on 570).
    c = combo(M, "2.11.0", "cu130")
    plain = rules.rule_driver_cuda(F, query(M, driver="570", gpu="RTX 4090"), c)
    assert not plain.ok
    assert "every CUDA 13 build needs >= 580.65.06" in plain.reason
    # §1c: forward compatibility is not for GeForce cards, even when asked for.
    asked = rules.rule_driver_cuda(F, query(M, driver="570", gpu="RTX 4090", forward_compat=True), c)
    assert not asked.ok
    assert "not GeForce RTX 4090" in asked.reason


def test_driver_570_runs_cu130_on_h100_with_forward_compat() -> None:
    # §5c: 13.0.0-13.0.2 images list 535, 550, 565, 570, 575 as forward-compatibility branches.
    q = query(M, driver="570", gpu="H100", forward_compat=True)
    check = rules.rule_driver_cuda(F, q, combo(M, "2.11.0", "cu130"))
    assert check.ok
    assert driver_mode(F, q, Version("13.0"))[0] is DriverMode.FORWARD_COMPAT
    assert "cuda-compat" in check.reason
    # Without --forward-compat the same data-center GPU gets no such exception.
    assert not rules.rule_driver_cuda(F, query(M, driver="570", gpu="H100"), combo(M, "2.11.0", "cu130")).ok


def test_forward_compat_only_for_branches_the_image_lists() -> None:
    # 560 is not among the 13.0 images' exception branches (535, 550, 565, 570, 575).
    q = query(M, driver="560", gpu="H100", forward_compat=True)
    check = rules.rule_driver_cuda(F, q, combo(M, "2.11.0", "cu130"))
    assert not check.ok
    assert "supports branches 535, 550, 565, 570, 575 only" in check.reason


def test_forward_compat_without_a_sourced_image_fails() -> None:
    # No nvidia/cuda 13.2 image (and so no exception list) is recorded: an unknown fact fails.
    q = query(M, driver="570", gpu="H100", forward_compat=True)
    check = rules.rule_driver_cuda(F, q, combo(M, "2.14.1", "cu132"))
    assert not check.ok
    assert "no sourced forward-compatibility driver branches for CUDA 13.2" in check.reason


def test_cpu_build_needs_no_driver() -> None:
    assert rules.rule_driver_cuda(F, query(M, driver="470.57.02"), combo(M, "2.5.1", "cpu")).ok


def test_torch_2_15_has_no_cuda_12_wheels() -> None:
    # §3a: 2.15 dropped cu126; "PyTorch 2.14 is the last release to ship any CUDA 12.x wheels".
    e = explain(M, query(M, torch="2.15", cuda="12"))
    assert not e.valid
    assert [(c.rule, c.ok) for c in e.checks] == [("selection", False)]
    assert "torch 2.15.0 publishes cu130, cu132, cpu" in e.checks[0].reason
    assert lookup(M, query(M, torch="2.15", cuda="12")).valid == ()
    assert explain(M, query(M, torch="2.14.1", cuda="12")).id.startswith("torch2.14.1-cu126-")


# --- arch-torch (§2 binary compatibility, §3d compiled arch lists) ---------------------------------------


def test_sm_89_runs_the_sm_86_sass_of_torch_2_5_1_cu124() -> None:
    # §3d: Ada has no dedicated SASS in any official build; it runs sm_86 (pytorch#95648).
    check = rules.rule_arch_torch(F, query(M, arch="sm_89"), combo(M, "2.5.1", "cu124"))
    assert check.ok
    assert check.reason == "sm_89 runs the sm_86 SASS (same major, lower minor)"
    c = combo(M, "2.5.1", "cu124")
    assert c.variant.sass is not None
    assert arch_support(Arch(8, 9), c.variant.sass, c.variant.ptx) == (ArchSupport.COMPATIBLE, Arch(8, 6))


def test_sm_86_is_native_in_torch_2_5_1_cu124() -> None:
    check = rules.rule_arch_torch(F, query(M, gpu="RTX 3090"), combo(M, "2.5.1", "cu124"))
    assert check.ok
    assert check.reason == "sm_86: native SASS in torch 2.5.1+cu124"


def test_sm_120_has_no_runnable_code_in_any_torch_2_6_build() -> None:
    # §2 rule 4: builds ending at sm_90 without PTX cannot run on Blackwell.
    release = next(t for t in M.torch if t.version == Version("2.6.0"))
    q = query(M, gpu="RTX 5090")
    gpu_builds = [v for v in release.variants if not v.is_cpu]
    assert {v.name for v in gpu_builds} == {"cu118", "cu124", "cu126"}
    for variant in gpu_builds:
        check = rules.rule_arch_torch(F, q, combo(M, "2.6.0", variant.name))
        # cu118's list is not recorded: not a refusal, not a pass
        assert check.status is (Status.NOT_CHECKED if variant.name == "cu118" else Status.FAIL), variant.name
    assert lookup(M, q).valid  # ... while newer builds do run on it
    assert lookup(M, query(M, gpu="RTX 5090", torch="2.6")).valid == ()  # cu118: CUDA 11.8 cannot target sm_120


def test_sm_120_is_native_from_the_cu128_builds() -> None:
    assert rules.rule_arch_torch(F, query(M, arch="sm_120"), combo(M, "2.7.0", "cu128")).ok


def test_cross_major_sass_never_runs() -> None:
    # §2 rule 1: sm_90 SASS does not run on sm_100 (B200).
    check = rules.rule_arch_torch(F, query(M, gpu="B200"), combo(M, "2.6.0", "cu126"))
    assert not check.ok
    assert check.reason.startswith("sm_100 has no runnable code in torch 2.6.0+cu126")


def test_b300_and_gb10_run_the_lower_minor_blackwell_sass() -> None:
    # §3d: B300 (sm_103) runs the sm_100 SASS; GB10 (sm_121) runs the sm_120 SASS.
    c = combo(M, "2.8.0", "cu128")
    assert c.variant.sass is not None
    assert arch_support(Arch(10, 3), c.variant.sass, c.variant.ptx) == (ArchSupport.COMPATIBLE, Arch(10, 0))
    assert arch_support(Arch(12, 1), c.variant.sass, c.variant.ptx) == (ArchSupport.COMPATIBLE, Arch(12, 0))


def test_v100_is_in_no_2_7_cu128_and_no_cu130_build() -> None:
    # §3d: sm_70 not in 2.7 cu128 nor any cu130/cu132 build; restored in 2.8-2.10 cu128.
    q = query(M, gpu="V100")
    assert not rules.rule_arch_torch(F, q, combo(M, "2.7.0", "cu128")).ok
    cu13 = [(str(t.version), v.name) for t in M.torch for v in t.variants if v.name in ("cu130", "cu132")]
    assert len(cu13) >= 10
    for torch, variant in cu13:
        assert not rules.rule_arch_torch(F, q, combo(M, torch, variant)).ok, (torch, variant)
    assert rules.rule_arch_torch(F, q, combo(M, "2.8.0", "cu128")).ok
    assert not rules.rule_arch_torch(F, q, combo(M, "2.11.0", "cu128")).ok


def test_unrecorded_arch_list_is_not_checked_rather_than_passed() -> None:
    # §3d: the 2.6 cu118 list is [U]; the matrix leaves it out, so no GPU is claimed to run it (nor refused).
    check = rules.rule_arch_torch(F, query(M, arch="sm_86"), combo(M, "2.6.0", "cu118"))
    assert check.status is Status.NOT_CHECKED and check.missing is Missing.FACT and not check.passed
    assert check.reason == "the compiled architectures of torch 2.6.0+cu118 are not recorded (no source)"


def test_no_arch_asked_and_cpu_build_pass() -> None:
    assert rules.rule_arch_torch(F, Query(), combo(M, "2.6.0", "cu118")).ok
    assert rules.rule_arch_torch(F, query(M, arch="sm_120"), combo(M, "2.6.0", "cpu")).ok


@pytest.mark.parametrize(
    ("gpu", "sass", "ptx", "expected"),
    [
        # §2 rule 3: arch-specific targets run on exactly their compute capability ...
        (Arch(9, 0), (Arch(9, 0, "a"),), (), (ArchSupport.NATIVE, Arch(9, 0, "a"))),
        (Arch(10, 0), (Arch(9, 0, "a"),), (), (ArchSupport.NONE, None)),
        (Arch(10, 3), (Arch(10, 0, "a"),), (), (ArchSupport.NONE, None)),
        # ... family targets within their major, on equal or higher minors only.
        (Arch(10, 3), (Arch(10, 0, "f"),), (), (ArchSupport.COMPATIBLE, Arch(10, 0, "f"))),
        (Arch(12, 0), (Arch(10, 0, "f"),), (), (ArchSupport.NONE, None)),
        (Arch(12, 0), (), (Arch(10, 0, "f"),), (ArchSupport.NONE, None)),
        # Plain PTX JIT-compiles for any equal-or-higher compute capability, across majors.
        (Arch(12, 0), (Arch(9, 0),), (Arch(9, 0),), (ArchSupport.PTX, Arch(9, 0))),
        (Arch(8, 6), (), (Arch(9, 0),), (ArchSupport.NONE, None)),
        # Native SASS wins over compatible SASS and PTX.
        (Arch(8, 6), (Arch(8, 0), Arch(8, 6)), (Arch(8, 6),), (ArchSupport.NATIVE, Arch(8, 6))),
    ],
)
def test_arch_support_binary_compatibility(
    gpu: Arch, sass: tuple[Arch, ...], ptx: tuple[Arch, ...], expected: tuple[ArchSupport, Arch | None]
) -> None:
    assert arch_support(gpu, sass, ptx) == expected


# --- ptx-jit-driver (§1b caveat: MVC cannot JIT PTX from a newer toolkit) ----------------------------------

SM_130 = Arch(13, 0)  # hypothetical post-Blackwell GPU: only the 12.0 PTX of 2.8 cu129 can serve it


def _future_gpu(driver: str) -> Query:
    return Query(driver=parse_driver(driver), archs=(SM_130,))


def test_cu129_ptx_serves_a_newer_gpu_with_a_full_level_driver() -> None:
    # §3d: 2.8 cu129 is built with 12.0+PTX; 575 (bare) >= 575.51.03, the 12.9 GA driver.
    c = combo(M, "2.8.0", "cu129")
    assert rules.rule_arch_torch(F, _future_gpu("575"), c).reason.startswith("sm_130: only PTX of sm_120")
    check = rules.rule_ptx_driver(F, _future_gpu("575"), c)
    assert check.ok
    assert check.reason == "the driver JIT-compiles CUDA 12.9 PTX at full level"


def test_cu129_ptx_needs_more_than_minor_version_compatibility() -> None:
    # 570.124.06 runs CUDA 12.9 only through MVC, which cannot JIT newer PTX.
    check = rules.rule_ptx_driver(F, _future_gpu("570.124.06"), combo(M, "2.8.0", "cu129"))
    assert not check.ok
    assert check.reason == (
        "PTX from CUDA 12.9 needs a driver at its full level (>= 575.51.03); minor-version compatibility cannot JIT it"
    )


def test_builds_without_ptx_serve_no_newer_gpu() -> None:
    assert not rules.rule_arch_torch(F, _future_gpu("575"), combo(M, "2.8.0", "cu128")).ok
    # PTX only runs on equal-or-higher compute capability: Jetson Thor (11.0) cannot use compute_120.
    assert not rules.rule_arch_torch(F, query(M, arch="sm_110"), combo(M, "2.8.0", "cu129")).ok


def test_ptx_rule_is_silent_when_sass_serves_the_gpu() -> None:
    check = rules.rule_ptx_driver(F, query(M, driver="570.124.06", arch="sm_120"), combo(M, "2.8.0", "cu129"))
    assert check.ok
    assert check.reason == "no PTX JIT involved: the build has SASS for the GPU"


# --- arch-cuda (§2: first/last nvcc per arch) -------------------------------------------------------------


def test_k80_is_in_cu118_builds_but_cuda_12_cannot_target_it() -> None:
    q = query(M, gpu="Tesla K80")
    assert rules.rule_arch_cuda(F, q, combo(M, "2.5.1", "cu118")).ok
    assert rules.rule_arch_torch(F, q, combo(M, "2.5.1", "cu118")).reason.startswith("sm_37: native SASS")
    check = rules.rule_arch_cuda(F, q, combo(M, "2.5.1", "cu121"))
    assert not check.ok
    assert check.reason == "CUDA 12.0+ dropped sm_37 (Kepler)"


def test_cuda_13_dropped_volta() -> None:
    check = rules.rule_arch_cuda(F, query(M, gpu="V100"), combo(M, "2.9.0", "cu130"))
    assert not check.ok
    assert check.reason == "CUDA 13.0+ dropped sm_70 (Volta)"
    assert rules.rule_arch_cuda(F, query(M, gpu="V100"), combo(M, "2.9.0", "cu128")).ok


def test_a_toolkit_older_than_the_gpu_serves_it_through_same_major_sass() -> None:
    # CUDA 11.7 predates Ada (11.8) but its sm_86 code runs on sm_89 (§2 rule 1).
    check = rules.rule_arch_cuda(F, query(M, gpu="RTX 4090"), combo(M, "1.13.1", "cu117"))
    assert check.ok
    assert "predates sm_89" in check.reason


def test_a_toolkit_older_than_the_gpu_generation_cannot_serve_it() -> None:
    check = rules.rule_arch_cuda(F, query(M, gpu="H100"), combo(M, "2.0.1", "cu117"))
    assert not check.ok
    assert check.reason == "sm_90 (Hopper) needs CUDA >= 11.8; this build is CUDA 11.7"


# --- cudnn-cuda (§4) --------------------------------------------------------------------------------------


def test_cudnn_9_1_has_a_cuda_12_build() -> None:
    check = rules.rule_cudnn_cuda(F, query(M, driver="550"), combo(M, "2.5.1", "cu124"))
    assert check.passed
    assert check.reason.startswith("cuDNN 9.1.0.70 has a CUDA 12 build")
    unasked = rules.rule_cudnn_cuda(F, Query(), combo(M, "2.5.1", "cu124"))
    assert unasked.status is Status.NOT_CHECKED and unasked.condition == "driver >= 525.60.13"


def test_cudnn_for_cuda_13_needs_the_580_driver() -> None:
    # §4: cuDNN for CUDA 13 lists >= 580.65.06.
    check = rules.rule_cudnn_cuda(F, query(M, driver="575"), combo(M, "2.11.0", "cu130"))
    assert not check.ok
    assert check.reason == "cuDNN 9.19.0.56 for CUDA 13 needs driver >= 580.65.06"
    assert rules.rule_cudnn_cuda(F, query(M, driver="580.65.06"), combo(M, "2.11.0", "cu130")).ok


def test_forward_compat_brings_its_own_user_mode_driver_for_cudnn() -> None:
    q = query(M, driver="570", gpu="H100", forward_compat=True)
    assert rules.rule_cudnn_cuda(F, q, combo(M, "2.11.0", "cu130")).ok
    assert lookup(M, query(M, driver="570", gpu="H100", forward_compat=True, variant="cu130")).valid


def test_unrecorded_cudnn_is_not_checked_rather_than_passed() -> None:
    # §3a/3b: only the PyPI cu132 wheel of 2.15 was inspected; the cu130 cuDNN is unknown.
    check = rules.rule_cudnn_cuda(F, Query(), combo(M, "2.15.0", "cu130"))
    assert check.status is Status.NOT_CHECKED and check.missing is Missing.FACT
    assert check.reason == "the cuDNN of torch 2.15.0+cu130 is not recorded"


def test_cudnn_without_a_build_for_the_variants_cuda_major() -> None:
    # §4: 9.10.2.21 is the last cuDNN with a CUDA 11 build, so 9.17 + CUDA 11.8 cannot exist.
    old = 'name = "cu118"\ncuda = "11.8"\ncudnn = "9.1.0.70"'
    text = edit(BASE, old, old.replace("9.1.0.70", "9.17.1.4"))
    text += '[[cudnn]]\nlabel = "9.17+"\nversions = ">=9.17,<10"\ncuda_majors = [12, 13]\ncuda_tested = "12.x"\n'
    text += 'source = "nv"\n'
    m = small(text)
    check = rules.rule_cudnn_cuda(Facts(m), Query(), combo(m, "2.5.1", "cu118"))
    assert not check.ok
    assert check.reason == "cuDNN 9.17.1.4 has no CUDA 11 build"


# --- cudnn-arch (§4: SM ranges) ---------------------------------------------------------------------------


def test_cudnn_9_17_starts_at_turing() -> None:
    # §4: 9.17.0 lists SM 7.5-12.0 only; 2.11 cu128 pins cuDNN 9.17.1.4 (§3c).
    check = rules.rule_cudnn_arch(F, query(M, gpu="V100"), combo(M, "2.11.0", "cu128"))
    assert not check.ok
    assert check.reason == "cuDNN 9.17.1.4 starts at sm_75; sm_70 is older"
    assert not rules.rule_cudnn_arch(F, query(M, arch="sm_61"), combo(M, "2.14.1", "cu130")).ok
    assert rules.rule_cudnn_arch(F, query(M, gpu="T4"), combo(M, "2.11.0", "cu128")).ok


def test_cudnn_9_1_has_no_blackwell_code() -> None:
    # §4: 9.0-9.5 cover SM 5.0-9.0; a higher major gets nothing.
    check = rules.rule_cudnn_arch(F, query(M, gpu="B200"), combo(M, "2.5.1", "cu124"))
    assert not check.ok
    assert check.reason == "cuDNN 9.1.0.70 has code up to sm_90; sm_100 is newer"


def test_cudnn_9_10_serves_gb10_through_the_sm_120_code() -> None:
    check = rules.rule_cudnn_arch(F, query(M, arch="sm_121"), combo(M, "2.8.0", "cu128"))
    assert check.ok


def test_cudnn_arch_with_unrecorded_cudnn_is_not_checked() -> None:
    check = rules.rule_cudnn_arch(F, query(M, arch="sm_90"), combo(M, "2.15.0", "cu130"))
    assert check.status is Status.NOT_CHECKED and check.missing is Missing.FACT


def test_cudnn_range_without_bounds_is_not_reported_as_covered() -> None:
    # a range with only its lower bound: "covers sm_86 (range 5.0..?)" was a pass it never checked
    m = small(edit(BASE, 'max_arch = "9.0"\n', ""))
    check = rules.rule_cudnn_arch(Facts(m), query(m, arch="sm_86"), combo(m, "2.5.1", "cu124"))
    assert check.status is Status.NOT_CHECKED and "range is not recorded" in check.reason
    assert rules.rule_cudnn_arch(F, query(M, arch="sm_86"), combo(M, "2.5.1", "cu124")).passed


# --- python-torch (§3a: PyPI wheel tags) ------------------------------------------------------------------


def test_torch_2_9_has_no_cp39_wheels() -> None:
    check = rules.rule_python_torch(F, Query(), combo(M, "2.9.0", "cu128", python="3.9"))
    assert not check.ok
    assert check.reason == "torch 2.9.0 has no wheels for Python 3.9 (wheels: 3.10-3.14)"
    assert rules.rule_python_torch(F, Query(), combo(M, "2.8.0", "cu128", python="3.9")).ok


@pytest.mark.parametrize(
    ("torch", "python", "ok"),
    [("2.1.2", "3.12", False), ("2.2.0", "3.12", True), ("2.15.0", "3.10", False), ("2.15.0", "3.15", True)],
)
def test_python_wheel_tags(torch: str, python: str, ok: bool) -> None:
    release = next(t for t in M.torch if str(t.version) == torch)
    check = rules.rule_python_torch(F, Query(), combo(M, torch, release.pypi_default, python=python))
    assert check.ok is ok


# --- python-os ----------------------------------------------------------------------------------------------


def test_ubuntu_22_04_only_offers_python_3_10() -> None:
    check = rules.rule_python_os(F, Query(), combo(M, "2.5.1", "cu124", python="3.12", os="ubuntu22.04"))
    assert not check.ok
    assert check.reason == "ubuntu22.04 offers Python 3.10, not 3.12"
    assert rules.rule_python_os(F, Query(), combo(M, "2.5.1", "cu124", python="3.10", os="ubuntu22.04")).ok


def test_debian12_offers_python_3_12_through_the_python_image() -> None:
    check = rules.rule_python_os(F, Query(), combo(M, "2.5.1", "cu124", python="3.12", os="debian12"))
    assert check.ok
    assert check.reason == "Python 3.12 from the official python:3.12-slim-bookworm image"
    assert rules.rule_python_os(F, Query(), combo(M, "2.5.1", "cu124", python="3.11", os="debian12")).reason == (
        "debian12 ships Python 3.11"
    )


# --- glibc-os (§3a: manylinux_2_28 from 2.7.0) ----------------------------------------------------------


def test_glibc_2_17_cannot_run_manylinux_2_28_wheels() -> None:
    centos7 = fake_os("centos7", "2.17")
    c = combo(M, "2.7.0", "cu126")
    check = rules.rule_glibc_os(F, Query(), type(c)(c.torch, c.variant, c.python, centos7))
    assert not check.ok
    assert check.reason == "centos7 glibc 2.17 < 2.28 (manylinux_2_28_x86_64)"


def test_glibc_2_17_runs_manylinux1_wheels() -> None:
    centos7 = fake_os("centos7", "2.17")
    c = combo(M, "2.6.0", "cu124")
    check = rules.rule_glibc_os(F, Query(), type(c)(c.torch, c.variant, c.python, centos7))
    assert check.ok
    assert check.reason == "centos7 glibc 2.17 >= 2.5 (manylinux1_x86_64)"


@pytest.mark.parametrize(
    ("tag", "floor"),
    [
        ("manylinux1_x86_64", "2.5"),
        ("manylinux2010_x86_64", "2.12"),
        ("manylinux2014_x86_64", "2.17"),
        ("manylinux_2_28_x86_64", "2.28"),
        ("manylinux_2_34_aarch64", "2.34"),
    ],
)
def test_manylinux_glibc_floors(tag: str, floor: str) -> None:
    assert Facts.glibc_floor(tag) == Version(floor)


def test_unknown_platform_tag_is_not_checked() -> None:
    m = small(edit(BASE, 'platform_tag = "manylinux1_x86_64"', 'platform_tag = "musllinux_1_2_x86_64"'))
    check = rules.rule_glibc_os(Facts(m), Query(), combo(m, "2.5.1", "cu124"))
    assert check.status is Status.NOT_CHECKED
    assert check.reason == "the glibc of platform tag musllinux_1_2_x86_64 is not recorded"


# --- companions (§3a: torchvision / torchaudio pins) ----------------------------------------------------


def test_companions_of_torch_2_5_1() -> None:
    check = rules.rule_companions(F, Query(), combo(M, "2.5.1", "cu124"))
    assert check.ok
    assert check.reason == "torchvision 0.20.1 and torchaudio 2.5.1 accept torch 2.5.1 on Python 3.11"


def test_companion_pinning_another_torch_fails() -> None:
    # A hand-built matrix (not validated) where torchvision 0.20.1 pins torch 2.5.0 instead.
    old = 'requires_torch = "==2.5.1"\nsource = "pypi"\n\n[[torchaudio]]'
    m = small(edit(BASE, old, old.replace("==2.5.1", "==2.5.0")))
    check = rules.rule_companions(Facts(m), Query(), combo(m, "2.5.1", "cu124"))
    assert not check.ok
    assert check.reason == "torchvision 0.20.1 requires torch==2.5.0"


def test_companion_python_requirement() -> None:
    old = 'version = "2.5.1"\nrequires_torch = "==2.5.1"'
    m = small(edit(BASE, old, old + '\npython = ">=3.12"'))
    check = rules.rule_companions(Facts(m), Query(), combo(m, "2.5.1", "cu124", python="3.11"))
    assert not check.ok
    assert check.reason == "torchaudio 2.5.1 requires Python>=3.12"


def test_torchvision_0_29_excludes_only_the_3_14_1_patch() -> None:
    # torchvision 0.26-0.29 declare ">=3.10,!=3.14.1": the 3.14 series as a whole is fine.
    assert rules.rule_companions(F, Query(), combo(M, "2.14.1", "cu130", python="3.14")).ok
    assert not rules.rule_companions(F, Query(), combo(M, "2.14.1", "cu130", python="3.9")).ok


# --- driver-gpu (NVIDIA/open-gpu-kernel-modules GPU tables; CUDA Toolkit, Driver, and Architecture Matrix) -----


@pytest.mark.parametrize(
    ("gpu", "driver", "ok"),
    [
        # Architecture floors: the first driver that lists a GPU of the architecture, at both ends.
        ("RTX 4090", "520.56.05", False),
        ("RTX 4090", "520.56.06", True),
        ("RTX 4090", "470", False),
        ("H100", "450", False),
        ("H100", "520.56.06", True),
        ("RTX 5090", "550", False),
        ("RTX 5090", "570.86.15", False),
        ("RTX 5090", "570.86.16", True),
        ("A100", "450.51.04", False),
        ("A100", "450.51.05", True),
        # Legacy architectures: the last branch that supports them, and the first that does not.
        ("Tesla K80", "470", True),
        ("Tesla K80", "495", False),
        ("V100", "580", True),
        ("V100", "590.44.01", False),
        ("GTX 1080", "580.65.06", True),
        ("GTX 1080", "595", False),
        # Products that arrived after their architecture, branch by branch (RTX 4060: 525.147.05 in R525, no
        # R530 release, 535.86.05 in R535, every later branch).
        ("RTX 4060", "525.147.04", False),
        ("RTX 4060", "525.147.05", True),
        ("RTX 4060", "530", False),
        ("RTX 4060", "535.54.03", False),
        ("RTX 4060", "535.86.05", True),
        ("RTX 4060", "545", True),
        ("H200", "535", False),
        ("H200", "550.90.06", False),
        ("H200", "550.90.07", True),
        ("RTX PRO 6000 Blackwell Server Edition", "570", False),
        ("RTX PRO 6000 Blackwell Server Edition", "575.57.08", True),
    ],
)
def test_driver_gpu_window(gpu: str, driver: str, ok: bool) -> None:
    check = rules.rule_driver_gpu(F, query(M, driver=driver, gpu=gpu), combo(M, "2.14.1", "cu126"))
    assert check.ok is ok, check.reason


def test_driver_gpu_names_the_range() -> None:
    check = rules.rule_driver_gpu(F, query(M, driver="590", gpu="V100"), combo(M, "2.14.1", "cu126"))
    assert check.reason == (
        "NVIDIA V100 (Volta) is supported up to the 580 driver branch (legacy); driver 590 (any 590.x, read as "
        "the newest) no longer supports it: use a 580.x driver"
    )
    check = rules.rule_driver_gpu(F, query(M, driver="530", gpu="RTX 4060"), combo(M, "2.14.1", "cu126"))
    assert check.reason == (
        "GeForce RTX 4060 (Ada Lovelace) needs driver >= 525.147.05 (525), >= 535.86.05 (535 and later); "
        "driver 530 (any 530.x, read as the newest) lacks it"
    )


def test_driver_gpu_checks_every_architecture_asked() -> None:
    q = query(M, driver="535", arch=("sm_80", "sm_120"))
    check = rules.rule_driver_gpu(F, q, combo(M, "2.14.1", "cu126"))
    assert not check.ok
    assert check.reason.startswith("sm_120 (Blackwell) needs driver >= 570.86.16")


def test_driver_gpu_is_silent_without_a_driver_or_a_gpu() -> None:
    assert rules.rule_driver_gpu(F, query(M, gpu="V100"), combo(M, "2.14.1", "cu126")).ok
    assert rules.rule_driver_gpu(F, query(M, driver="590"), combo(M, "2.14.1", "cu126")).ok


def test_lookup_rules_out_every_combination_for_a_gpu_the_driver_predates() -> None:
    found = lookup(M, query(M, driver="550", gpu="RTX 5090"))
    assert found.valid == ()
    assert found.reasons()[0][0].startswith("GeForce RTX 5090 (Blackwell) needs driver >= 570.86.16")


# --- platform (GPU hosts; PyPI wheels per platform) -------------------------------------------------------


def test_jetson_is_refused_with_where_its_wheels_come_from() -> None:
    check = rules.rule_platform(F, query(M, gpu="Jetson AGX Orin"), combo(M, "2.14.1", "cu126"))
    assert not check.ok
    assert "is a Jetson on L4T (Tegra)" in check.reason
    assert "https://forums.developer.nvidia.com/t/pytorch-for-jetson/72048" in check.reason


def test_a_grace_gpu_asks_for_arm64_images() -> None:
    q = query(M, gpu="GH200", platform="linux/amd64")
    check = rules.rule_platform(F, q, combo(M, "2.14.1", "cu126"))
    assert (
        check.reason == "NVIDIA GH200 sits in a Grace (Arm, SBSA) system: it needs linux/arm64 images, not linux/amd64"
    )
    assert parse_query(M, RawQuery(gpus=("GH200",))).platform is Platform.ARM64
    assert parse_query(M, RawQuery(gpus=("DGX Spark",))).platform is Platform.ARM64


def test_a_variant_without_recorded_wheels_for_the_platform_is_not_checked() -> None:
    # RELEASE.md lists aarch64 CUDA 12.6 builds, per CUDA version only: unknown for this release, not "none"
    check = rules.rule_platform(F, Query(), combo(M, "2.14.1", "cu126", platform="linux/arm64"))
    assert check.status is Status.NOT_CHECKED and check.missing is Missing.FACT
    assert check.reason == "linux/arm64 cu126 wheels of this release are not recorded (recorded: linux/amd64)"
