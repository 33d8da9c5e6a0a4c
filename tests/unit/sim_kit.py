"""Running the smoke suite's real code against REAL torch on simulated GPUs (tests/gpu_sim).

The host venv has no torch (it is not a project dependency): these tests run the suite, or one check
(tests/gpu_sim/drive.py), in a subprocess of a Python that has it: $TORCHYARD_SIM_PYTHON, else
.venv-torch/bin/python (scripts/setup makes it with PyPI's torch 2.13.0 CPU wheel). Without one the tests
are skipped, and pytest's summary says why.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIM_DIR = ROOT / "tests" / "gpu_sim"
SUITE = ROOT / "builder" / "smoke"
H100 = {"name": "Simulated NVIDIA H100", "capability": [9, 0]}
A100 = {"name": "Simulated NVIDIA A100", "capability": [8, 0]}
T4 = {"name": "Simulated Tesla T4", "capability": [7, 5]}
# What a CUDA build reports (the CPU wheel reports no CUDA, no cuDNN, no NCCL, no architectures).
CUDA_BUILD: dict[str, Any] = {
    "cuda": "13.0",
    "cudnn": 92400,
    "nccl": [2, 27, 3],
    "arch_list": ["sm_75", "sm_80", "sm_90"],
}


WORKFLOW_FAULTS = (
    "ddp_desync",
    "ddp_hang",
    "nondeterministic",
    "profiler_off",
    "ort_perturbed",
    "ort_cpu_fallback",
    "conv_no_grad",
    "compile_wrong_tanh",
    "compile_wrong_erf",
)  # tests/gpu_sim/torchyard_faults.py


def torch_python() -> str | None:
    found = os.environ.get("TORCHYARD_SIM_PYTHON") or str(ROOT / ".venv-torch" / "bin" / "python")
    return found if Path(found).exists() else None


needs_torch = pytest.mark.skipif(
    torch_python() is None,
    reason="no Python with real torch (scripts/setup makes .venv-torch; or $TORCHYARD_SIM_PYTHON)",
)


def sim(gpus: list[dict[str, Any]], *, faults: tuple[str, ...] = (), **changes: Any) -> dict[str, Any]:
    return dict(CUDA_BUILD, gpus=gpus, faults=list(faults), **changes)


def _env(config: dict[str, Any]) -> dict[str, str]:
    """The simulated GPUs; their "faults" that the workflow checks' fault layer knows go to it as well."""
    env = dict(os.environ, PYTHONPATH=f"{SIM_DIR}{os.pathsep}{ROOT}", TORCHYARD_GPU_SIM=json.dumps(config))
    env["TORCHYARD_SMOKE_FAULTS"] = json.dumps([f for f in config.get("faults", []) if f in WORKFLOW_FAULTS])
    return env


def check(name: str, config: dict[str, Any], tmp_path: Path, *, full: bool = False) -> dict[str, Any]:
    """One check in one process (drive.py): status, message, observed, the settings before and after."""
    python = torch_python()
    assert python is not None
    argv = [python, str(SIM_DIR / "drive.py"), name, *(["--full"] * full)]
    done = subprocess.run(
        argv, env=_env(config), cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def suite(config: dict[str, Any], tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """The whole suite as an image runs it (a worker per GPU check), under the simulated GPUs."""
    python = torch_python()
    assert python is not None
    out = tmp_path / "report.json"
    argv = [python, str(SUITE), "--small", "--json", str(out), *args]
    done = subprocess.run(
        argv, env=_env(config), cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False
    )
    assert out.exists(), done.stdout[-2000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return done.returncode, report


def python_with_torch(code: str, config: dict[str, Any], tmp_path: Path) -> str:
    """Run code with the torch Python under the simulated GPUs; returns its stdout."""
    python = torch_python()
    assert python is not None
    done = subprocess.run(
        [python, "-c", code], env=_env(config), cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def cpu_suite(
    tmp_path: Path, *args: str, faults: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """The suite on real torch without simulated GPUs; `faults` (tests/gpu_sim/torchyard_faults.py) break it;
    `env`: more environment for it."""
    python = torch_python()
    assert python is not None
    out = tmp_path / "report.json"
    env = dict(os.environ, **(env or {}))
    env.update(PYTHONPATH=f"{SIM_DIR}{os.pathsep}{ROOT}", TORCHYARD_SMOKE_FAULTS=json.dumps(list(faults)))
    env.pop("TORCHYARD_GPU_SIM", None)
    argv = [python, str(SUITE), "--json", str(out), *args]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert out.exists(), done.stdout[-2000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return done.returncode, report
