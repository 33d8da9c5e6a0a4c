"""dataloader and compile.cpu against fake torch: the failures a real run here cannot produce."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_torch import Batch, FakeImage, Gpu, Installer, Tensor, _data_loader
from smoke_kit import context, outcome

from builder.smoke import checks_compile, checks_data
from builder.smoke.framework import FAIL, PASS, SKIP


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Installer:
    return Installer(monkeypatch)


def _failing_loader(monkeypatch: pytest.MonkeyPatch, modules: dict[str, Any], error: str) -> None:
    """A DataLoader that raises RuntimeError(error), as torch's does when a worker dies."""

    def loader(*args: object, **kwargs: object) -> object:
        raise RuntimeError(error)

    monkeypatch.setattr(modules["torch"], "utils", SimpleNamespace(data=SimpleNamespace(DataLoader=loader)))


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
    _failing_loader(
        monkeypatch,
        install(FakeImage()),
        "DataLoader worker (pid 42) is killed by signal: Bus error. It is possible that ...",
    )
    status, message = outcome("dataloader", context(tmp_path))
    assert status == FAIL and "ran out of shared memory" in message and "--shm-size=2g (or --ipc=host)" in message


def test_the_dataloader_pins_batches_when_a_gpu_is_there(install: Installer, tmp_path: Path) -> None:
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


# --- dataloader, held whole (issue 24: mutmut on the decorated check) ------------------------------------------


def _recording_loader(monkeypatch: pytest.MonkeyPatch, modules: dict[str, Any], batches: Any = None) -> list[Any]:
    """The fake DataLoader, recording how the check asked for it; `batches` replaces what it yields."""
    calls: list[Any] = []

    def loader(dataset: Any, batch_size: int, num_workers: int = 0, pin_memory: bool = False) -> Any:
        calls.append((len(dataset), batch_size, num_workers, pin_memory))
        return batches if batches is not None else _data_loader(dataset, batch_size, num_workers, pin_memory)

    monkeypatch.setattr(modules["torch"], "utils", SimpleNamespace(data=SimpleNamespace(DataLoader=loader)))
    return calls


def test_the_dataloader_runs_64_items_in_batches_of_8_on_2_workers_and_names_dev_shm(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _recording_loader(monkeypatch, install(FakeImage(gpus=(Gpu(),))))
    monkeypatch.setattr(checks_data, "shm_size", lambda path=checks_data.SHM: 256 << 20)  # exactly enough
    assert outcome("dataloader", context(tmp_path)) == (PASS, "2 workers, 8 batches, pinned (256 MiB /dev/shm)")
    assert calls == [(64, 8, 2, True)]
    monkeypatch.setattr(checks_data, "shm_size", lambda path=checks_data.SHM: None)
    assert outcome("dataloader", context(tmp_path)) == (PASS, "2 workers, 8 batches, pinned (no /dev/shm)")


def test_the_dataloader_fails_on_unpinned_or_wrong_batches(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = install(FakeImage(gpus=(Gpu(),)))
    items = [Tensor([float(i)]) for i in range(64)]
    _recording_loader(monkeypatch, modules, [Batch(items, pinned=False)])
    assert outcome("dataloader", context(tmp_path)) == (
        FAIL,
        "pin_memory=True, yet the batches are not in pinned memory",
    )
    _recording_loader(monkeypatch, modules, [Batch(items[:63], pinned=True)])  # an item lost on the way
    assert outcome("dataloader", context(tmp_path)) == (FAIL, "the workers' batches sum to 1953.0, expected 2016")


def test_a_dataloader_error_that_is_not_about_shared_memory_is_not_blamed_on_it(
    install: Installer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_loader(
        monkeypatch, install(FakeImage()), "DataLoader worker (pid 42) exited unexpectedly with exit code 1"
    )
    status, message = outcome("dataloader", context(tmp_path))
    assert "shared memory" not in message and "exited unexpectedly" in message, (status, message)
