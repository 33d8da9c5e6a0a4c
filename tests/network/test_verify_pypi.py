"""`torchyard matrix verify --only torch` against the real PyPI, for the newest torch release in the matrix.

Skipped (never passed) where PyPI cannot be reached. What it asserts: every PyPI-served wheel claim of that
release holds (the release, its wheels per Python and platform, its pins); PyTorch's own index may be out
of reach here, and then those items must say so, never pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from builder.matrix import load_matrix

pytestmark = pytest.mark.network
ROOT = Path(__file__).resolve().parents[2]
CA = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or True


def reachable() -> bool:
    try:
        answer = requests.get(
            "https://pypi.org/simple/torch/",
            timeout=10,
            verify=CA,
            headers={"Accept": "application/vnd.pypi.simple.v1+json"},
        )
    except requests.RequestException:
        return False
    return answer.ok


def test_the_newest_release_holds_on_pypi() -> None:
    if not reachable():
        pytest.skip("PyPI's simple index cannot be reached from here")
    newest = max(r.version for r in load_matrix().torch)
    done = subprocess.run(
        [sys.executable, "-m", "builder", "matrix", "verify", "--only", "torch", "--torch", f"=={newest}", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(done.stdout)
    on_pypi = [f for f in report["findings"] if "(PyPI)" in f["subject"]]
    assert on_pypi, done.stderr
    assert {f["check"] for f in on_pypi} >= {"release", "wheels", "cuDNN pin", "NCCL pin", "CUDA runtime pin"}
    assert [f for f in on_pypi if f["status"] not in ("ok", "unrecorded")] == []
    others = [f for f in report["findings"] if "(PyPI)" not in f["subject"]]
    assert all(f["status"] in ("ok", "unreachable", "unchecked", "unrecorded") for f in others)
    assert done.returncode == (5 if any(f["status"] == "unreachable" for f in report["findings"]) else 0)
