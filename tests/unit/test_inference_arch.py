"""The rule onnxruntime-arch: the ONNX Runtime release the inference image takes must carry code for every GPU
asked, per its wheels' libonnxruntime_providers_cuda.so ([onnxruntime.<platform>], read from the wheels).

Planted lists (a release's recorded code replaced here) show the rule fail and pass; the real lists show what
`lookup --gpu B200 --inference` picks: onnxruntime-gpu 1.29-1.31's x86_64 provider has SASS up to sm_90a and
sm_120a and no PTX, so a B200 (sm_100) runs none of them (microsoft/onnxruntime#26181, #26245, #27528)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from matrix_kit import combo, query, real
from test_cli_lookup import Cli, cli

from builder.core.archs import arch_from
from builder.core.errors import MatrixError
from builder.core.kinds import Platform
from builder.core.resources import default_matrix_path
from builder.matrix.loader import load_matrix
from builder.matrix.model import Matrix, WheelCode
from builder.resolve import onnx
from builder.resolve.facts import Facts
from builder.resolve.resolver import lookup
from builder.resolve.rules import arch_support, rule_onnxruntime_arch
from builder.resolve.rules.check import ArchSupport, Check, Missing, Status

M = real()
__all__ = ["cli"]  # the fixture, used by name
NO_KERNEL = 'it fails with "no kernel image is available for execution on the device"'


def planted(m: Matrix, version: str, platform: Platform, sass: tuple[str, ...], ptx: tuple[str, ...] = ()) -> Matrix:
    """The matrix with one onnxruntime-gpu release's GPU code on `platform` replaced by these lists."""
    code = WheelCode(
        platform=platform,
        sass=tuple(arch_from(a) for a in sass),
        ptx=tuple(arch_from(a) for a in ptx),
        wheel=f"onnxruntime_gpu-{version}-planted.whl",
        sha256="0" * 64,
        sources=("pypi-onnxruntime-gpu",),
    )
    releases = tuple(
        replace(r, code=(*(c for c in r.code if c.platform is not platform), code))
        if r.package == "onnxruntime-gpu" and str(r.version) == version
        else r
        for r in m.onnxruntime
    )
    return replace(m, onnxruntime=releases)


def check(m: Matrix, gpu: str, platform: str = "linux/amd64", torch: str = "2.14.1", variant: str = "cu130") -> Check:
    c = combo(m, torch, variant, platform=platform)
    return rule_onnxruntime_arch(Facts(m), query(m, gpu=gpu, inference=True, platform=platform), c)


def test_a_planted_list_without_sm_100_fails_for_a_b200() -> None:
    m = planted(M, "1.31.1", Platform.AMD64, ("8.0", "9.0", "12.0"))
    found = check(m, "B200")
    assert found.status is Status.FAIL
    assert found.reason == (
        "sm_100 has no code in onnxruntime-gpu==1.31.1's CUDA provider (linux/amd64 wheels: sm_80 sm_90 sm_120; "
        f"no PTX): {NO_KERNEL}"
    )
    assert found.sources == ("arch-suffixes", "ort-no-kernel-image", "pypi-onnxruntime-gpu")


@pytest.mark.parametrize(
    ("sass", "ptx", "gpu", "reason"),
    [
        (("10.0",), (), "B200", "sm_100: native SASS (sm_100) in onnxruntime-gpu==1.31.1"),
        (("10.0",), (), "B300", "sm_103 runs onnxruntime-gpu==1.31.1's sm_100 SASS (same major, lower minor)"),
        (
            ("9.0a",),
            ("9.0",),
            "B200",
            "sm_100: only PTX of sm_90 in onnxruntime-gpu==1.31.1, JIT-compiled by the driver at first use",
        ),
    ],
)
def test_sass_of_the_same_major_at_or_below_or_ptx_at_or_below_covers_the_gpu(
    sass: tuple[str, ...], ptx: tuple[str, ...], gpu: str, reason: str
) -> None:
    found = check(planted(M, "1.31.1", Platform.AMD64, sass, ptx), gpu)
    assert (found.status, found.reason) == (Status.PASS, reason)


def test_arch_specific_code_runs_only_on_its_own_gpu_and_arch_specific_ptx_on_no_newer_one() -> None:
    m = planted(M, "1.31.1", Platform.AMD64, ("10.0a",), ("9.0a",))
    assert check(m, "B200").status is Status.PASS
    b300 = check(m, "B300")  # sm_103: sm_100a SASS is not for it, compute_90a PTX is not forward compatible
    assert b300.status is Status.FAIL and b300.reason.startswith("sm_103 has no code in onnxruntime-gpu==1.31.1's")


def test_a_planted_aarch64_list_without_sm_100_fails_for_a_gb200_and_the_real_one_does_too() -> None:
    m = planted(M, "1.31.1", Platform.ARM64, ("9.0", "12.0"))
    found = check(m, "GB200", platform="linux/arm64")
    assert found.status is Status.FAIL
    assert "(linux/arm64 wheels: sm_90 sm_120; no PTX)" in found.reason
    real_one = check(M, "GB200", platform="linux/arm64")
    assert real_one.status is Status.FAIL
    assert real_one.reason == (
        "sm_100 has no code in onnxruntime-gpu==1.31.1's CUDA provider (linux/arm64 wheels: sm_89 sm_90a sm_120a "
        f"sm_121a; no PTX): {NO_KERNEL}"
    )
    assert "ort-wheel-1311-arm64" in real_one.sources
    assert check(m, "GB200", platform="linux/arm64").rule == "onnxruntime-arch"
    assert check(M, "GH200", platform="linux/arm64").status is Status.PASS  # sm_90a: native on sm_90
    assert check(M, "DGX Spark", platform="linux/arm64").status is Status.PASS  # sm_121a: native on the GB10


def test_the_real_lists_refuse_a_b200_on_the_newest_ort_and_serve_an_rtx_5090() -> None:
    b200 = check(M, "B200")
    assert b200.status is Status.FAIL
    assert "(linux/amd64 wheels: sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a; no PTX)" in b200.reason
    assert check(M, "RTX 5090").reason == "sm_120: native SASS (sm_120a) in onnxruntime-gpu==1.31.1"
    assert check(M, "H100").status is Status.PASS


def test_without_a_gpu_the_condition_names_the_code_and_an_unrecorded_list_is_not_checked() -> None:
    c = combo(M, "2.14.1", "cu130")
    found = rule_onnxruntime_arch(Facts(M), query(M, inference=True), c)
    assert (found.status, found.missing) == (Status.NOT_CHECKED, Missing.INPUT)
    assert found.condition == (
        "a GPU onnxruntime-gpu==1.31.1 has code for (sm_75 sm_80 sm_86 sm_89 sm_90a sm_120a; no PTX)"
    )
    bare = replace(M, onnxruntime=tuple(replace(r, code=()) for r in M.onnxruntime))
    unknown = rule_onnxruntime_arch(Facts(bare), query(bare, gpu="B200", inference=True), c)
    assert (unknown.status, unknown.missing) == (Status.NOT_CHECKED, Missing.FACT)
    assert unknown.reason == (
        "the GPU code of onnxruntime-gpu==1.31.1's linux/amd64 wheels is not recorded (read from no wheel)"
    )


def test_a_cpu_torch_and_a_combination_without_an_ort_have_nothing_to_check() -> None:
    cpu = rule_onnxruntime_arch(Facts(M), query(M, inference=True, variant="cpu"), combo(M, "2.14.1", "cpu"))
    assert (cpu.status, cpu.reason) == (Status.PASS, "onnxruntime==1.32.0 runs on the CPU: no GPU code needed")
    none = rule_onnxruntime_arch(
        Facts(M), query(M, gpu="B200", inference=True), combo(M, "2.14.1", "cu130", python="3.10")
    )
    assert none.status is Status.PASS and "the rule onnxruntime says why" in none.reason


def _covers(release_code: WheelCode | None, gpu: str) -> bool:
    assert release_code is not None
    return arch_support(arch_from(gpu), release_code.sass, release_code.ptx)[0] is not ArchSupport.NONE


def test_lookup_for_a_b200_never_names_an_ort_without_sm_100_code_or_ptx() -> None:
    found = lookup(M, query(M, gpu="B200", inference=True))
    assert found.valid
    for result in found.valid:
        ort = onnx.choose(M, result.combo).release
        if ort is not None and ort.package == "onnxruntime-gpu":
            assert _covers(ort.code_on(result.combo.platform), "sm_100"), (result.combo.id, ort.id)
    first = onnx.choose(M, found.valid[0].combo).release
    assert first is not None and first.id == "onnxruntime-gpu==1.26.0"  # CUDA 12: compute_90 PTX, JIT on sm_100


def test_lookup_for_a_gb200_names_no_ort_it_cannot_run() -> None:
    found = lookup(M, query(M, gpu="GB200", inference=True, platform="linux/arm64"))
    for result in found.valid:
        ort = onnx.choose(M, result.combo).release
        assert ort is None or _covers(ort.code_on(Platform.ARM64), "sm_100"), result.combo.id


def test_lookup_on_the_command_line_names_the_ort_that_runs_and_why_the_rest_do_not(cli: Cli) -> None:
    run = cli("lookup", "--gpu", "B200", "--inference")
    assert run.code == 0, run.err
    pip = next(line for line in run.out.splitlines() if line.strip().startswith("pip:"))
    assert pip.endswith("onnxruntime-gpu==1.26.0")
    assert "sm_100 has no code in onnxruntime-gpu==1.31.1's CUDA provider" in run.out


def test_explain_shows_the_rule_with_the_wheel_it_was_read_from(cli: Cli) -> None:
    flags = ("--torch", "2.14.1", "--variant", "cu130", "--python", "3.11", "--os", "debian12")
    run = cli("explain", "--gpu", "B200", "--inference", *flags)
    assert run.code == 1
    lines = run.out.splitlines()
    failed = next(i for i, line in enumerate(lines) if line.split()[:2] == ["FAIL", "onnxruntime-arch"])
    sources = [line.split("source: ", 1)[1] for line in lines[failed + 1 : failed + 4] if "source: " in line]
    assert M.sources["ort-wheel-1311-amd64"].url in sources
    assert sources[-1].endswith("onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl")
    data = cli("explain", "--gpu", "B200", "--inference", *flags, "--json").json()
    rule = next(c for c in data["checks"] if c["rule"] == "onnxruntime-arch")
    assert rule["status"] == "fail" and "ort-wheel-1311-amd64" in rule["sources"]


_ORT_1311 = 'wheel = "onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl"'


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            _ORT_1311,
            'wheel = "onnxruntime_gpu-1.29.0-cp312-cp312-manylinux_2_28_x86_64.whl"',
            "onnxruntime[1.31.1].amd64.wheel: 'onnxruntime_gpu-1.29.0-cp312-cp312-manylinux_2_28_x86_64.whl' is "
            "not one of this release's x86_64 wheels (onnxruntime_gpu-1.31.1-...)",
        ),
        (
            'sha256 = "05d548956197b9d01f59b625de740e0d6be3593f874e241a12dc0362650ecdf7"',
            'sha256 = "05D5"',
            "onnxruntime[1.31.1].amd64.sha256: expected 64 lower-case hex digits, found '05D5'",
        ),
        (
            'sass = ["7.5", "8.0", "8.6", "8.9", "9.0a", "12.0a"]\nptx = []\n' + _ORT_1311,
            'sass = ["7.5", "13.1"]\nptx = []\n' + _ORT_1311,
            "onnxruntime[1.31.1].amd64.sass: no [[arch]] for sm_131",
        ),
    ],
)
def test_a_bad_gpu_code_table_is_one_located_line(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = default_matrix_path().read_text()
    assert text.count(old) == 1
    path = tmp_path / "matrix.toml"
    path.write_text(text.replace(old, new))
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    assert str(err.value).split(": ", 1)[1] == message


def test_gpu_code_for_a_platform_without_wheels_or_for_the_cpu_package_is_refused(tmp_path: Path) -> None:
    text = default_matrix_path().read_text()
    table = (
        '\n[onnxruntime.arm64]\nsass = ["9.0"]\nptx = []\nwheel = "x.whl"\nsha256 = "'
        + "0" * 64
        + '"\nsource = "pypi"\n'
    )
    for anchor, message in (
        (
            'note = "the first CUDA 13 release on PyPI"\nsource = ["pypi-onnxruntime-gpu", "ort-127-cuda13"]\n',
            "onnxruntime[1.27.0].arm64: the release records no linux/arm64 wheels (platforms)",
        ),
        (
            'version = "1.32.0"\npython = ["3.11", "3.12", "3.13", "3.14"]\nplatforms = ["amd64", "arm64"]\n'
            'source = "pypi-onnxruntime"\n',
            "onnxruntime[1.32.0].arm64: the CPU package has no GPU code",
        ),
    ):
        assert text.count(anchor) == 1
        path = tmp_path / "matrix.toml"
        path.write_text(text.replace(anchor, anchor + table))
        with pytest.raises(MatrixError) as err:
            load_matrix(path)
        assert str(err.value).split(": ", 1)[1] == message
