"""dataloader and compile.cpu against fake torch: the failures a real run here cannot produce."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_torch import FakeImage, Installer
from smoke_kit import context, outcome

from builder.smoke import checks_compile, checks_data
from builder.smoke.framework import FAIL, PASS, SKIP


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Installer:
    return Installer(monkeypatch)


def test_a_dev_shm_of_dockers_default_64_mib_fails_naming_the_fix(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(FakeImage())
    monkeypatch.setattr(checks_data, "shm_size", lambda path=checks_data.SHM: 64 << 20)
    assert outcome("dataloader", context(tmp_path)) == (
        FAIL,
        "/dev/shm is 64 MiB, too small for DataLoader workers (needs 256+): start the container with "
        "--shm-size=2g (or --ipc=host)",
    )


def test_workers_running_out_of_shared_memory_fail_naming_the_fix(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = install(FakeImage())

    def loader(*args: object, **kwargs: object) -> object:
        raise RuntimeError("DataLoader worker (pid 42) is killed by signal: Bus error. It is possible that ...")

    monkeypatch.setattr(modules["torch"], "utils", SimpleNamespace(data=SimpleNamespace(DataLoader=loader)))
    status, message = outcome("dataloader", context(tmp_path))
    assert status == FAIL and "ran out of shared memory" in message and "--shm-size=2g (or --ipc=host)" in message


def test_the_dataloader_pins_batches_when_a_gpu_is_there(install: Installer, tmp_path: Path) -> None:
    from fake_torch import Gpu

    install(FakeImage(gpus=(Gpu(),)))
    status, message = outcome("dataloader", context(tmp_path))
    assert status == PASS and message.startswith("2 workers, 8 batches, pinned")
    install(FakeImage())
    assert outcome("dataloader", context(tmp_path))[1].startswith("2 workers, 8 batches (")


def test_compile_cpu_needs_a_cpp_compiler(install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    modules = install(FakeImage())
    monkeypatch.setattr(modules["torch"], "compile", lambda model: model, raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert outcome("compile.cpu", context(tmp_path)) == (
        FAIL,
        "no C++ compiler (g++) on PATH: torch.compile (Inductor) compiles C++ at run time",
    )


def test_compile_cpu_is_skipped_before_torch_2(install: Installer, tmp_path: Path) -> None:
    install(FakeImage(torch="1.13.1+cu117"))
    assert outcome("compile.cpu", context(tmp_path)) == (SKIP, "torch 1.13.1+cu117 has no torch.compile (torch >= 2.0)")


def test_a_compile_error_fails_with_its_first_line(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(FakeImage())
    monkeypatch.setattr(checks_compile, "_torch_with_compile", lambda: __import__("torch"))

    def broken(torch: object, device: str) -> tuple[float, float]:
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nlong Inductor details")

    monkeypatch.setattr(checks_compile, "_compare", broken)
    assert outcome("compile.cpu", context(tmp_path)) == (
        FAIL,
        "torch.compile on the CPU failed: RuntimeError: InvalidCxxCompiler: No working C++ compiler found",
    )
