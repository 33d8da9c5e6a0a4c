"""linux/arm64 images (issue 15): one Dockerfile text for both platforms, -arm64 tags, a build for the plan's
platform whose result is checked (the image's platform, the machine its smoke suite saw), a smoke suite scaled
for emulation, base images from a registry mirror. Against a fake engine at the one seam."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine, FakeRegistry, contents_of, wall_off_the_engine
from render_kit import addone, arch, combination, matrix, plan

from builder.core.errors import BuildError, UsageError
from builder.core.kinds import Flavor, Platform, Strategy
from builder.core.names import check_mirror
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.plan import Plan, plan_json
from builder.pipeline.suite import EMULATED_TIMEOUT_SCALE, SmokeOptions, _flags, for_platform
from builder.pipeline.verify import observed_tag
from builder.render.tags import image_tags
from builder.smoke.manifest import Observed

CPU_ARM64 = "torch2.5.1-cpu-py3.11-debian12-arm64"  # the docker tier's emulated image: PyPI's aarch64 CPU wheel
CUDA_ARM64 = "torch2.14.1-cu130-py3.11-debian12-arm64"
CUDA_AMD64 = "torch2.14.1-cu130-py3.11-debian12"
REPO = "127.0.0.1:5000/team/torch"
R, W = Flavor.RUNTIME, Strategy.WHEELS


@pytest.fixture(autouse=True)
def no_real_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    wall_off_the_engine(monkeypatch)


def fake(p: Plan, **knobs: object) -> FakeEngine:
    engine = FakeEngine(contents_of(p), registry=FakeRegistry())
    for name, value in knobs.items():
        assert hasattr(engine, name), name
        setattr(engine, name, value)
    return engine


def run(engine: FakeEngine, p: Plan, tmp_path: Path) -> list[str]:
    log: list[str] = []
    settings = BuildSettings(repo=REPO, flavors=(R,), out_dir=tmp_path / "ctx")
    assert engine.registry is not None
    build(engine, p, settings, log.append, engine.registry)
    return log


# --- the Dockerfile ------------------------------------------------------------------------------------


def _differing_lines(a: str, b: str) -> list[tuple[str, str]]:
    left, right = a.splitlines(), b.splitlines()
    assert len(left) == len(right)
    return [(x, y) for x, y in zip(left, right, strict=True) if x != y]


@pytest.mark.parametrize("extensions", [False, True])
def test_the_cuda_dockerfile_is_the_same_text_on_both_platforms_but_for_the_combination(extensions: bool) -> None:
    # pip picks each platform's wheel itself: the templates do not branch on the platform. With one --arch list
    # the two Dockerfiles differ only where they name the combination (the header and its label).
    kwargs: dict[str, Any] = {"archs": (arch("sm_90"),), "extensions": (addone(),) if extensions else ()}
    amd64, arm64 = plan(CUDA_AMD64, **kwargs), plan(CUDA_ARM64, **kwargs)
    differing = _differing_lines(amd64.dockerfile, arm64.dockerfile)
    assert differing[0] == (f"# combination: {CUDA_AMD64}", f"# combination: {CUDA_ARM64}")
    assert set(differing[1:]) == {
        (f'      io.torchyard.combination="{CUDA_AMD64}" \\', f'      io.torchyard.combination="{CUDA_ARM64}" \\')
    }


def test_the_arm64_plan_takes_the_aarch64_wheels_compiled_list() -> None:
    # aarch64 wheels carry sm_80 sm_90 sm_100 sm_110 sm_120 (no sm_75, no sm_86): the labels and the smoke
    # suite's expectations say what the arm64 image really holds, not the x86_64 list.
    arm64 = plan(CUDA_ARM64)
    assert [a.name for a in arm64.archs] == ["sm_80", "sm_90", "sm_100", "sm_110", "sm_120"]
    assert dict(arm64.target(R).labels)["io.torchyard.arch-list"] == "sm_80 sm_90 sm_100 sm_110 sm_120"
    assert [a.name for a in plan(CUDA_AMD64).archs] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


def test_the_cpu_wheel_of_an_older_release_is_pypis_default_on_aarch64() -> None:
    # torch 2.5.1: PyPI's aarch64 wheel is the CPU build (x86_64: PyTorch's CPU index).
    arm64 = plan(CPU_ARM64)
    assert "--index-url" not in arm64.dockerfile
    assert "https://download.pytorch.org/whl/cpu" in plan("torch2.5.1-cpu-py3.11-debian12").dockerfile
    assert plan_json(arm64, REPO)["platform"] == "linux/arm64"


def test_a_registry_mirror_serves_docker_hubs_base_images() -> None:
    p = plan(CPU_ARM64, registry_mirror="127.0.0.1:5000/torchyard-base")
    assert "FROM 127.0.0.1:5000/torchyard-base/library/debian:bookworm-slim AS os" in p.dockerfile
    cuda_base = plan("torch2.14.1-cu130-py3.12-ubuntu24.04-arm64", Strategy.CUDA_BASE, registry_mirror="m.example")
    assert "FROM m.example/nvidia/cuda:13.0.2-base-ubuntu24.04 AS os" in cuda_base.dockerfile
    assert "FROM m.example/nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04 AS toolchain" in cuda_base.dockerfile
    assert p.content_hash != plan(CPU_ARM64).content_hash  # another base is another image


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("https://mirror.example", "it has a scheme"),
        ("mirror", "'mirror' is not a registry host"),
        ("mirror.example/Upper", "the path component 'Upper'"),
        ("", "it is empty"),
    ],
)
def test_a_bad_registry_mirror_is_refused_with_the_flag(value: str, problem: str) -> None:
    with pytest.raises(UsageError) as raised:
        check_mirror(value)
    assert str(raised.value).startswith(f"--registry-mirror: {value!r} is not a registry mirror: {problem}")
    assert raised.value.exit_code == 2


# --- tags ----------------------------------------------------------------------------------------------


def test_arm64_tags_end_in_arm64_and_amd64_tags_stay_as_they_were() -> None:
    arm64, amd64 = plan(CPU_ARM64).target(R).tags, plan("torch2.5.1-cpu-py3.11-debian12").target(R).tags
    assert arm64.all() == ("2.5.1-cpu-py3.11-debian12-runtime-arm64", "2.5-cpu-py3.11-debian12-runtime-arm64")
    assert amd64.all() == ("2.5.1-cpu-py3.11-debian12-runtime", "2.5-cpu-py3.11-debian12-runtime")


def test_the_newest_patch_alias_is_decided_per_platform() -> None:
    # 2.14.1 cu130 is the newest 2.14 patch on both platforms; latest is 2.15.0's (PyPI default cu132 on both).
    m = matrix()
    arm64 = image_tags(m, combination(CUDA_ARM64), R, W, ())
    assert arm64.aliases == ("2.14-cuda13.0-py3.11-debian12-runtime-arm64",)
    older = image_tags(m, combination("torch2.14.0-cu130-py3.11-debian12-arm64"), R, W, ())
    assert older.aliases == ()


def test_the_observed_tag_carries_the_machine_the_suite_ran_on() -> None:
    seen = Observed.from_dict({"torch": "2.5.1", "python": "3.11", "os": "debian12"})
    assert observed_tag(seen, R, W, (), machine="aarch64") == "2.5.1-cpu-py3.11-debian12-runtime-arm64"
    assert observed_tag(seen, R, W, (), machine="x86_64") == "2.5.1-cpu-py3.11-debian12-runtime"
    assert observed_tag(seen, R, W, (), machine="riscv64") == "2.5.1-cpu-py3.11-debian12-runtime-unknown-riscv64"
    assert observed_tag(seen, R, W, (), machine="") == "2.5.1-cpu-py3.11-debian12-runtime-unknown-machine"


# --- the build -----------------------------------------------------------------------------------------


def test_an_arm64_build_asks_for_its_platform_and_scales_the_smoke_suite_for_emulation(tmp_path: Path) -> None:
    p = plan(CPU_ARM64)
    engine = fake(p)
    log = run(engine, p, tmp_path)
    [call] = engine.of("build")
    assert call.args[call.args.index("--platform") + 1] == "linux/arm64"
    [smoke] = [c for c in engine.of("run") if "--json" in c.args]
    assert smoke.args[-3:] == ("--small", "--timeout-scale", f"{EMULATED_TIMEOUT_SCALE:g}")
    assert "[runtime] linux/arm64 runs emulated on this linux/amd64 engine: smaller training check, timeouts x10" in log
    assert engine.tags[f"{REPO}:2.5.1-cpu-py3.11-debian12-runtime-arm64"]


def test_a_native_arm64_engine_runs_the_full_suite(tmp_path: Path) -> None:
    p = plan(CPU_ARM64)
    engine = fake(p, native="linux/arm64")
    run(engine, p, tmp_path)
    [smoke] = [c for c in engine.of("run") if "--json" in c.args]
    assert "--small" not in smoke.args and "--timeout-scale" not in smoke.args


def test_an_engine_that_built_the_wrong_platform_tags_nothing(tmp_path: Path) -> None:
    # e.g. a base image that resolved to the host's platform: the image config says amd64.
    p = plan(CPU_ARM64)
    engine = fake(p, built_platform="linux/amd64")
    with pytest.raises(BuildError) as raised:
        run(engine, p, tmp_path)
    assert str(raised.value) == (
        "2.5.1-cpu-py3.11-debian12-runtime-arm64: the engine built a linux/amd64 image, not linux/arm64"
    )
    assert engine.of("tag") == [] and engine.of("run") == []


def test_an_image_whose_insides_say_x86_64_never_gets_an_arm64_tag(tmp_path: Path) -> None:
    p = plan(CPU_ARM64)
    engine = fake(p, machine="x86_64")
    with pytest.raises(BuildError) as raised:
        run(engine, p, tmp_path)
    assert str(raised.value) == (
        "the tag 2.5.1-cpu-py3.11-debian12-runtime-arm64 does not describe the image: its contents say "
        "2.5.1-cpu-py3.11-debian12-runtime"
    )
    assert engine.of("tag") == []


def test_exec_format_error_says_how_to_register_the_emulator(tmp_path: Path) -> None:
    p = plan(CPU_ARM64)
    failure = BuildError("docker build failed (exit 1): exec /bin/sh: exec format error")
    engine = fake(p, fail_build=failure)
    with pytest.raises(BuildError) as raised:
        run(engine, p, tmp_path)
    message = str(raised.value)
    assert message.startswith("docker build failed (exit 1): exec /bin/sh: exec format error -- linux/arm64 steps")
    assert "apt-get install qemu-user-static binfmt-support" in message
    native = plan("torch2.5.1-cpu-py3.11-debian12")
    engine = fake(native, fail_build=failure)
    with pytest.raises(BuildError) as raised:
        run(engine, native, tmp_path / "amd64")
    log = tmp_path / "amd64" / "ctx" / "build-runtime.log"
    assert str(raised.value) == f"{failure}. Log: {log}"  # the host's own platform: no emulator to blame


# --- the smoke options ---------------------------------------------------------------------------------


def test_the_smoke_options_scale_only_for_a_foreign_platform() -> None:
    base = SmokeOptions(arch="sm_90")
    assert for_platform(base, "linux/amd64", "linux/amd64") is base
    scaled = for_platform(base, Platform.ARM64.value, "linux/amd64")
    assert (scaled.small, scaled.timeout_scale, scaled.arch) == (True, EMULATED_TIMEOUT_SCALE, "sm_90")
    assert _flags(scaled) == ["--arch", "sm_90", "--small", "--timeout-scale", "10"]
    assert _flags(base) == ["--arch", "sm_90"]
