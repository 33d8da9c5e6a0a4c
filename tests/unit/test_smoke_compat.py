"""builder/smoke/compat.py: what differs between torch releases and containers, detected rather than assumed."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_torch import FakeImage, Installer
from fatbin_kit import AARCH64, ELF, Entry, container, entry, raw_container, sass, shared_library
from smoke_kit import context, outcome

from builder.smoke import compat
from builder.smoke.framework import FAIL, PASS

# --- CPU threads from the container's quota ---------------------------------------------------------------


def cgroup(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return str(tmp_path)


@pytest.fixture
def affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))  # a big host


@pytest.mark.parametrize(
    ("files", "threads"),
    [
        ({"cpu.max": "200000 100000\n"}, 2),  # cgroup v2: --cpus 2
        ({"cpu.max": "150000 100000\n"}, 1),  # --cpus 1.5: whole CPUs only
        ({"cpu.max": "50000 100000\n"}, 1),  # less than one CPU: still one thread
        ({"cpu.max": "max 100000\n"}, 64),  # no limit: the affinity mask
        ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),  # cgroup v1
        ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 64),
        ({}, 64),  # nothing readable
    ],
)
def test_threads_come_from_the_cpu_quota_not_the_host(
    tmp_path: Path, affinity: None, files: dict[str, str], threads: int
) -> None:
    assert compat.cpu_threads(cgroup(tmp_path, files))[0] == threads


def test_the_affinity_mask_caps_a_larger_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})  # --cpuset-cpus 0-2
    found = compat.cpu_threads(cgroup(tmp_path, {"cpu.max": "800000 100000\n"}))
    assert found == (3, "3 CPUs in the affinity mask")


# --- GradScaler and autocast across torch releases ----------------------------------------------------


def test_grad_scaler_is_torch_amp_from_2_3_and_torch_cuda_amp_before() -> None:
    made: list[tuple[str, Any]] = []
    new = SimpleNamespace(amp=SimpleNamespace(GradScaler=lambda device, enabled: made.append(("amp", device))))
    old = SimpleNamespace(  # torch 1.13 - 2.2: no torch.amp.GradScaler
        amp=SimpleNamespace(),
        cuda=SimpleNamespace(amp=SimpleNamespace(GradScaler=lambda enabled: made.append(("cuda", enabled)))),
    )
    compat.grad_scaler(new, "cuda", True)
    compat.grad_scaler(old, "cuda", True)
    assert made == [("amp", "cuda"), ("cuda", True)]
    cpu = compat.grad_scaler(old, "cpu", False)  # no CPU scaler before 2.3: one that steps and does nothing else
    steps: list[int] = []
    optimizer = SimpleNamespace(step=lambda: steps.append(1))
    assert cpu.scale(3.0) == 3.0
    cpu.step(optimizer)
    cpu.update()
    assert steps == [1]


def test_autocast_falls_back_to_torch_cuda_amp() -> None:
    old = SimpleNamespace(cuda=SimpleNamespace(amp=SimpleNamespace(autocast=lambda enabled: ("cuda.amp", enabled))))
    new = SimpleNamespace(autocast=lambda device_type, dtype, enabled: (device_type, dtype, enabled))
    assert compat.autocast(old, "cuda", "float16") == ("cuda.amp", True)
    assert compat.autocast(new, "cuda", "bfloat16") == ("cuda", "bfloat16", True)


# --- settings put back ---------------------------------------------------------------------------------


def test_restored_puts_back_every_flag_even_when_the_check_fails() -> None:
    torch: Any = SimpleNamespace(
        backends=SimpleNamespace(
            cudnn=SimpleNamespace(benchmark=False, deterministic=True, enabled=True, allow_tf32=True),
            cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)),
        ),
        precision=["highest"],
    )
    torch.get_float32_matmul_precision = lambda: torch.precision[0]
    torch.set_float32_matmul_precision = lambda value: torch.precision.__setitem__(0, value)
    threads = [4]
    torch.get_num_threads = lambda: threads[0]
    torch.set_num_threads = lambda n: threads.__setitem__(0, n)
    with pytest.raises(RuntimeError), compat.restored(torch):
        compat.set_tf32(torch, True)
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("medium")
        torch.set_num_threads(64)
        raise RuntimeError("a check fails half way")
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, True)
    assert torch.backends.cudnn.benchmark is False and torch.precision == ["highest"] and threads == [4]


# --- compiled architectures when get_arch_list() is empty (torch < ~2.12 without a GPU) -----------------


def libtorch(tmp_path: Path, data: bytes, name: str = "libtorch_cuda.so") -> str:
    (tmp_path / "torch" / "lib").mkdir(parents=True, exist_ok=True)
    (tmp_path / "torch" / "lib" / name).write_bytes(data)
    return str(tmp_path / "torch" / "__init__.py")


def many(*archs: int, n: int = 10) -> list[Entry]:
    return [e for arch in archs for e in sass(*[arch] * n)]


def test_an_empty_arch_list_is_read_from_libtorch_cudas_fat_binary(tmp_path: Path) -> None:
    # x86_64 torch 2.14: ~475 cubins per target, and 1 sm_89 cubin that does not make sm_89 a target.
    torch = SimpleNamespace(cuda=SimpleNamespace(get_arch_list=list))
    torch.__file__ = libtorch(tmp_path, shared_library(container(*many(75, 80, 86, 90), Entry(ELF, 89))))
    found = compat.compiled_archs(torch)
    assert found == (["sm_75", "sm_80", "sm_86", "sm_90"], [], "the fat binary of libtorch_cuda.so")


def test_torch_1_13_keeps_its_kernels_in_libtorch_cuda_cu(tmp_path: Path) -> None:
    torch = SimpleNamespace(cuda=SimpleNamespace(get_arch_list=list))
    torch.__file__ = libtorch(
        tmp_path, shared_library(container(*many(37, 50, 60, 70, 75, 80, 86))), "libtorch_cuda_cu.so"
    )
    assert compat.compiled_archs(torch)[0] == ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]


def aarch64_libtorch(tmp_path: Path) -> str:
    """What PyPI's aarch64 torch 2.11-2.15 carries (/work/notes/pypi-platforms.md, read from the wheels):
    SASS sm_80 sm_90 sm_100 sm_110 sm_120, no PTX, plus a few arch-specific cubins (sm_90a, sm_100a, sm_121a)."""
    extras = b"".join(entry(Entry(ELF, a), header=64, flags=0x100000) for a in (90, 100, 121))
    body = b"".join(entry(e) for e in many(80, 90, 100, 110, 120)) + extras
    return libtorch(tmp_path, shared_library(raw_container(body), machine=AARCH64))


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("sm_90", (PASS, "sm_90: native")),  # GH200
        ("sm_100", (PASS, "sm_100: native")),  # GB200
        ("sm_121", (PASS, "sm_121: compatible (sm_120)")),  # DGX Spark (GB10)
        ("sm_110", (PASS, "sm_110: native")),  # Thor
        ("sm_86", (PASS, "sm_86: compatible (sm_80)")),
        ("sm_75", (FAIL, "torch has no code for sm_75 (SASS: sm_80 sm_90 sm_100 sm_110 sm_120; PTX: none)")),
    ],
)
def test_arch_checks_on_an_aarch64_libtorch_cuda(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, target: str, expected: tuple[str, str]
) -> None:
    modules = Installer(monkeypatch)(FakeImage(arch_list=()))  # get_arch_list() == [] as without a GPU
    monkeypatch.setattr(modules["torch"], "__file__", aarch64_libtorch(tmp_path), raising=False)
    ctx = context(tmp_path, arch=target)
    assert outcome("arch.torch", ctx) == expected
    assert ctx.observed["torch_arch_source"] == "the fat binary of libtorch_cuda.so"
