"""The GPU checks against fake torch modules: failure injection for the branches that need no real torch.

Covered here: no GPU (skipped; failed with --require-gpu), GPU device nodes without CUDA (the driver),
a CPU build, a GPU the build has no code for, several GPUs, a driver older than the image's minimum, the
training comparison's bookkeeping and the extension self-test. The checks' real torch code (numerics,
tolerances, spawn, restored settings) runs against real torch in test_gpu_sim.py (tests/gpu_sim).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_torch import Extension, FakeImage, FakeTrainer, Gpu, Installer
from smoke_kit import CHECKS, context, files, outcome

from builder.smoke import checks_gpu, checks_gpu_perf
from builder.smoke.framework import FAIL, PASS, SKIP

GPU_CHECKS = sorted(name for name, c in CHECKS.items() if c.gpu)
L4 = Gpu(name="NVIDIA L4", capability=(8, 9))
H200 = Gpu(name="NVIDIA H200", capability=(9, 0))
B200 = Gpu(name="NVIDIA B200", capability=(10, 0))


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Installer:
    return Installer(monkeypatch)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """The driver version the checks see: set driver[0]. The fake cannot multiply: every GPU 'computes'."""
    found: list[str | None] = ["590.48.01"]
    monkeypatch.setattr(checks_gpu, "driver_version", lambda: found[0])
    monkeypatch.setattr(checks_gpu, "_matmul_error", lambda torch, index: 0.0)
    yield found


@pytest.fixture(autouse=True)
def no_device_nodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This host's /dev is not the test's: no GPU device nodes unless a test makes some."""
    monkeypatch.setattr(checks_gpu, "DEVICE_NODES", str(tmp_path / "dev" / "nvidia[0-9]*"))


def test_the_gpu_checks_are_the_ones_the_issue_names() -> None:
    assert GPU_CHECKS == [
        "gpu.autocast",
        "gpu.compile",
        "gpu.cudnn_conv",
        "gpu.ddp",  # issue 20
        "gpu.determinism",  # issue 20
        "gpu.devices",
        "gpu.extensions",
        "gpu.gemm",
        "gpu.memory",
        "gpu.nccl",
        "gpu.notebook",  # issue 41 (notebook images)
        "gpu.onnx",  # issue 20 (inference images)
        "gpu.profiler",  # issue 20
        "gpu.sdpa",
        "gpu.tf32",
        "gpu.train",
    ]


@pytest.mark.parametrize("name", GPU_CHECKS)
def test_device_nodes_without_cuda_fail_naming_the_host_driver_and_the_image_minimum(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The container sees /dev/nvidia0 but CUDA does not initialise: a too-old driver, not "no GPU".
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia0").touch()
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n")
    monkeypatch.setattr(checks_gpu, "DRIVER_FILE", str(version))
    install(FakeImage(gpus=()))
    status, message = outcome(name, context(tmp_path))  # without --require-gpu too
    assert status == FAIL
    assert "nvidia0 exists but torch.cuda.is_available() is False" in message
    assert "the host's driver is 550.54.15" in message and "needs driver >= 580.65.06" in message


def test_device_nodes_without_a_readable_driver_version_say_so(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia3").touch()
    monkeypatch.setattr(checks_gpu, "DRIVER_FILE", str(tmp_path / "missing"))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError("nvidia-smi")))
    install(FakeImage(gpus=()))
    message = outcome("gpu.devices", context(tmp_path, min_driver=None))[1]
    assert f"no driver version in {tmp_path / 'missing'}" in message and "unknown (no manifest)" in message


@pytest.mark.parametrize("name", GPU_CHECKS)
def test_without_a_gpu_every_gpu_check_is_skipped(install: Installer, tmp_path: Path, name: str) -> None:
    install(FakeImage(gpus=()))
    assert outcome(name, context(tmp_path)) == (SKIP, "no GPU visible")


@pytest.mark.parametrize("name", GPU_CHECKS)
def test_without_a_gpu_require_gpu_fails_every_gpu_check(install: Installer, tmp_path: Path, name: str) -> None:
    install(FakeImage(gpus=()))
    status, message = outcome(name, context(tmp_path, require_gpu=True))
    assert status == FAIL
    assert message.startswith("--require-gpu, but torch.cuda.is_available() is False")


@pytest.mark.parametrize("name", GPU_CHECKS)
def test_a_cpu_build_of_torch_skips_the_gpu_checks(install: Installer, tmp_path: Path, name: str) -> None:
    install(FakeImage(cuda=None, gpus=(L4,)))
    assert outcome(name, context(tmp_path)) == (SKIP, "CPU build of torch")


# --- gpu.devices -----------------------------------------------------------------------------------


def test_devices_names_each_gpu_and_how_the_build_runs_on_it(
    install: Installer, tmp_path: Path, driver: list[str | None]
) -> None:
    install(FakeImage(gpus=(L4, H200), arch_list=("sm_80", "sm_86", "sm_90")))
    ctx = context(tmp_path)
    assert outcome("gpu.devices", ctx) == (
        PASS,
        "2 GPU(s) computed: NVIDIA L4 sm_89 compatible, NVIDIA H200 sm_90 native; driver 590.48.01",
    )
    assert ctx.observed["gpus"][0] == {
        "index": 0,
        "name": "NVIDIA L4",
        "arch": "sm_89",
        "support": "compatible",
        "code": "sm_86",
    }
    assert ctx.observed["driver"] == "590.48.01"


def test_devices_accepts_ptx_for_a_newer_gpu(install: Installer, tmp_path: Path, driver: list[str | None]) -> None:
    install(FakeImage(gpus=(Gpu(name="RTX PRO 6000", capability=(12, 0)),), arch_list=("sm_90", "compute_90")))
    assert outcome("gpu.devices", context(tmp_path))[1].startswith("1 GPU(s) computed: RTX PRO 6000 sm_120 ptx")


def test_a_gpu_with_an_unsupported_capability_fails_naming_gpu_and_arch(
    install: Installer, tmp_path: Path, driver: list[str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    install(FakeImage(gpus=(H200, B200), arch_list=("sm_80", "sm_86", "sm_90")))
    assert outcome("gpu.devices", context(tmp_path)) == (
        FAIL,
        "GPU 1 (NVIDIA B200, sm_100) has no code in this torch build (sm_80 sm_86 sm_90)",
    )
    # a build that reports no architecture at all (get_arch_list() empty, no libtorch_cuda.so to read) says so
    install(FakeImage(gpus=(H200,), arch_list=()))
    monkeypatch.setattr(sys.modules["torch"], "__file__", str(tmp_path / "torch" / "__init__.py"), raising=False)
    assert outcome("gpu.devices", context(tmp_path)) == (
        FAIL,
        "GPU 0 (NVIDIA H200, sm_90) has no code in this torch build (no architectures found)",
    )


def test_a_driver_older_than_the_image_minimum_fails(
    install: Installer, tmp_path: Path, driver: list[str | None]
) -> None:
    install(FakeImage(gpus=(L4,)))
    driver[0] = "575.57.08"
    assert outcome("gpu.devices", context(tmp_path)) == (
        FAIL,
        "driver 575.57.08 is older than the image's minimum 580.65.06",
    )
    driver[0] = "580.65.06"  # equal is enough
    assert outcome("gpu.devices", context(tmp_path))[0] == PASS
    driver[0] = "1000.1"  # numbers, not strings, are compared
    assert outcome("gpu.devices", context(tmp_path))[0] == PASS


def test_an_unknown_driver_or_minimum_is_not_compared(
    install: Installer, tmp_path: Path, driver: list[str | None]
) -> None:
    install(FakeImage(gpus=(L4,)))
    driver[0] = None
    assert outcome("gpu.devices", context(tmp_path)) == (PASS, "1 GPU(s) computed: NVIDIA L4 sm_89 compatible")
    driver[0] = "470.1"
    assert outcome("gpu.devices", context(tmp_path, min_driver=None))[0] == PASS


def proc_version(monkeypatch: pytest.MonkeyPatch, text: str | None) -> AbstractContextManager[None]:
    return files(monkeypatch, checks_gpu, {"/proc/driver/nvidia/version": text})


def test_driver_version_from_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16)\n"
    with proc_version(monkeypatch, line):
        assert checks_gpu.driver_version() == "580.65.06"


def test_driver_version_from_nvidia_smi_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[Any] = ["575.57.08\n575.57.08\n", FileNotFoundError("nvidia-smi"), ""]

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return subprocess.CompletedProcess(argv, 0, answer, "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with proc_version(monkeypatch, None):
        assert [checks_gpu.driver_version() for _ in range(3)] == ["575.57.08", None, None]


# --- gpu.train: model.train replaced ---------------------------------------------------------------


ALL_PRECISIONS = ["fp32", "tf32", "amp_fp16_channels_last", "amp_bf16_channels_last"]
T4 = Gpu(name="Tesla T4", capability=(7, 5))
A100 = Gpu(name="NVIDIA A100-SXM4-80GB", capability=(8, 0))
FULL_GPU_RUN = {"device": "cuda", "steps": 30, "batch": 256, "warmup": 5}  # the real GPU's run
SMALL = {"size": 16, "width": 16}  # --small (simulated or emulated devices): train.cpu's size
SMALL_GPU_RUN = {"device": "cuda", "steps": 14, "batch": 8, "warmup": 2, **SMALL}


@pytest.mark.parametrize(
    ("gpu", "small", "configs"),
    [
        (H200, False, ALL_PRECISIONS),
        (A100, False, ALL_PRECISIONS),  # sm_80 is the first with TF32 and native bf16
        (A100, True, ALL_PRECISIONS),
        (T4, True, ["fp32", "amp_fp16_channels_last"]),  # no TF32, no native bf16
    ],
)
def test_train_times_each_precision_the_gpu_has_and_the_cpu(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: Gpu, small: bool, configs: list[str]
) -> None:
    trainer = FakeTrainer(first_loss=2.4, last_loss=0.2, images_per_second=4000.0, cpu_images_per_second=160.0)
    monkeypatch.setitem(sys.modules, "builder.smoke.model", trainer.module())
    modules = install(FakeImage(gpus=(gpu,)))
    monkeypatch.setattr(checks_gpu_perf, "cpu_threads", lambda: (6, "test"))
    ctx = context(tmp_path)
    ctx.small = small
    status, message = outcome("gpu.train", ctx)
    gpu_run = SMALL_GPU_RUN if small else FULL_GPU_RUN
    cpu_run = (
        {"device": "cpu", "steps": 2, "batch": 8, **SMALL} if small else {"device": "cpu", "steps": 3, "batch": 64}
    )
    # each precision warms itself up; the CPU runs the same model once, on every CPU the container has
    assert trainer.calls == [dict(gpu_run, precision=name) for name in configs] + [
        dict(cpu_run, precision="fp32", warmup=1)
    ]
    assert trainer.cudnn_benchmark == [True] * (len(configs) + 1)  # cuDNN picks its fastest convolutions
    torch = modules["torch"]
    assert torch.backends.cudnn.benchmark is False and torch.num_threads_set == [6, 4]  # both put back
    shown = ", ".join(f"{name} 4000" for name in configs)
    assert (status, message) == (PASS, f"images/s: {shown}; fp32 GPU/CPU x25.0")
    observed = ctx.observed["train_gpu"]
    assert observed["images_per_second"] == dict.fromkeys(configs, 4000.0)
    assert (observed["cpu_images_per_second"], observed["gpu_over_cpu_fp32"]) == (160.0, 25.0)
    assert list(observed["runs"]) == configs
    assert observed["runs"]["fp32"]["steps"] == gpu_run["steps"] and observed["runs"]["fp32"]["first_loss"] == 2.4


@pytest.mark.parametrize("last", [1.3, 1.2])  # 1.2: exactly half is not below half
def test_train_fails_when_a_loss_does_not_halve(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, last: float
) -> None:
    monkeypatch.setitem(sys.modules, "builder.smoke.model", FakeTrainer(first_loss=2.4, last_loss=last).module())
    install(FakeImage(gpus=(H200,)))
    assert outcome("gpu.train", context(tmp_path)) == (FAIL, f"fp32: loss 2.400 -> {last:.3f}, did not fall by half")


def test_sdpa_on_a_torch_without_it_is_skipped(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = install(FakeImage(gpus=(H200,), torch="1.13.1+cu117"))
    monkeypatch.setattr(modules["torch"], "nn", SimpleNamespace(functional=SimpleNamespace()), raising=False)
    assert outcome("gpu.sdpa", context(tmp_path)) == (
        SKIP,
        "torch 1.13.1+cu117 has no scaled_dot_product_attention (torch >= 2.0)",
    )


# --- gpu.extensions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("correct", "expected"),
    [(True, (PASS, "addone.add_one ok")), (False, (FAIL, "addone.add_one gave a wrong answer on the GPU"))],
)
def test_the_example_extension_runs(
    install: Installer, tmp_path: Path, correct: bool, expected: tuple[str, str]
) -> None:
    install(FakeImage(gpus=(L4,), extensions=(Extension(name="addone", correct=correct),)))
    assert outcome("gpu.extensions", context(tmp_path, extensions=["addone"])) == expected


def test_extensions_without_a_self_test_are_skipped(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = install(FakeImage(gpus=(L4,), extensions=(Extension(name="addone"),)))
    assert outcome("gpu.extensions", context(tmp_path)) == (SKIP, "the image declares no extensions")
    monkeypatch.delattr(modules["addone"], "add_one")
    assert outcome("gpu.extensions", context(tmp_path, extensions=["addone"])) == (
        SKIP,
        "addone: no known self-test (torchyard's example exposes add_one)",
    )
