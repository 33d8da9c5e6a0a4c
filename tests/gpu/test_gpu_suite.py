"""The smoke suite on a real GPU (marker `gpu`): the runbook's checks (docs/gpu-smoke.md) as tests.

They run where an NVIDIA GPU is visible (/dev/nvidia0 or `nvidia-smi -L`) and are skipped, with the reason
in pytest's summary, everywhere else (this project's development machines have none). Two ways in:

- the suite with a Python that has CUDA torch: $TORCHYARD_GPU_PYTHON, else this interpreter if it imports
  torch with CUDA;
- an image: $TORCHYARD_GPU_IMAGE, run by `torchyard smoke IMAGE --gpus all --require-gpu`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def gpu_visible() -> bool:
    if Path("/dev/nvidia0").exists():
        return True
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True, check=False).returncode == 0


def cuda_python() -> str | None:
    named = os.environ.get("TORCHYARD_GPU_PYTHON")
    if named:
        return named
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False)
    return sys.executable if found.returncode == 0 else None


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_visible(), reason="no NVIDIA GPU visible (no /dev/nvidia0, no nvidia-smi -L)"),
]


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["status"], c["message"]) for c in report["checks"]}


def test_the_whole_suite_passes_on_this_gpu(tmp_path: Path) -> None:
    python = cuda_python()
    if python is None:
        pytest.skip("a GPU is visible but no Python here imports CUDA torch (set TORCHYARD_GPU_PYTHON)")
    out = tmp_path / "report.json"
    argv = [python, str(ROOT / "builder" / "smoke"), "--require-gpu", "--only", "gpu.", "--json", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
    report = json.loads(out.read_text())
    failed = {n: m for n, (s, m) in _verdicts(report).items() if s == "failed"}
    assert failed == {}, done.stdout[-4000:]
    observed = report["observed"]
    assert observed["gpus"], "every visible GPU is listed"
    figures = observed["train_gpu"]["images_per_second"]
    assert figures["fp32"] > 0 and observed["train_gpu"]["gpu_over_cpu_fp32"] > 1  # a GPU beats the CPU
    if observed.get("bf16_native"):  # Ampere or newer: TF32 and AMP are faster than fp32 with TF32 off
        assert figures["amp_bf16_channels_last"] > figures["fp32"]
        assert observed["tf32_errors"]["on"] > 10 * observed["tf32_errors"]["off"]
    # issue 20: a DDP step timed on every GPU count run, determinism's cost, CUDA kernels in the profiler's trace
    gpus = len(observed["gpus"])
    assert list(observed["ddp_gpu"]["step_seconds"])[-1] == str(gpus)
    assert all(s > 0 for s in observed["ddp_gpu"]["step_seconds"].values())
    assert observed["determinism_gpu"]["cost"] > 0 and observed["profiler_gpu"]["kernels"] > 0


def test_an_image_passes_the_suite_on_this_gpu(tmp_path: Path) -> None:
    image = os.environ.get("TORCHYARD_GPU_IMAGE")
    if not image:
        pytest.skip("set TORCHYARD_GPU_IMAGE to an image to smoke-test on this GPU")
    out = tmp_path / "report.json"
    argv = [sys.executable, "-m", "builder", "smoke", image, "--gpus", "all", "--require-gpu", "--json", str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert all(status != "failed" for status, _ in _verdicts(json.loads(out.read_text())).values())
