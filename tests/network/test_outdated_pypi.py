"""`torchyard matrix outdated` against the real PyPI, for the projects it reads there.

Skipped (never passed) where PyPI cannot be reached. What it asserts: every PyPI project is checked (none
"not checked"), the exit code agrees with what is listed, and each listed release says how to add it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_verify_pypi import reachable

pytestmark = pytest.mark.network
ROOT = Path(__file__).resolve().parents[2]
ON_PYPI = ("torch", "cuda-toolkit", "nvidia-cudnn-cu13", "nvidia-nccl-cu13", "onnxruntime-gpu", "onnxruntime")


def test_every_pypi_project_is_checked_and_the_exit_code_agrees() -> None:
    if not reachable():
        pytest.skip("PyPI's simple index cannot be reached from here")
    only = [arg for name in ON_PYPI for arg in ("--only", name)]
    done = subprocess.run(
        [sys.executable, "-m", "builder", "matrix", "outdated", "--json", *only],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    data = json.loads(done.stdout)
    states = {f["name"]: f["state"] for f in data["findings"]}
    assert set(states) == set(ON_PYPI)
    assert "not checked" not in states.values(), data
    assert done.returncode == (7 if data["missing"] else 0), done.stderr
    for finding in data["findings"]:
        assert all(m["add"] and m["uploaded"] for m in finding["missing"]), finding
