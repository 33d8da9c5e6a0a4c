"""`torchyard matrix sync --nvidia-wheel` against the real PyPI, on the real matrix: it reads the pages and either
finds nothing newer than the newest recorded or proposes entries that pass `matrix check` (the command checks before
it prints). Skipped (never passed) where PyPI cannot be reached; ONNX Runtime is left out (its wheels are hundreds
of MB: tests/unit/test_sync_ort.py reads small ones)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_verify_pypi import reachable

pytestmark = pytest.mark.network
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["nvidia-cudnn-cu13", "nvidia-nccl-cu13"])
def test_the_newer_releases_of_a_wheel_are_nothing_or_entries_that_pass_the_check(package: str) -> None:
    if not reachable():
        pytest.skip("PyPI's simple index cannot be reached from here")
    done = subprocess.run(
        [sys.executable, "-m", "builder", "matrix", "sync", "--nvidia-wheel", package],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith(f"# {package}: nothing on ") or last.startswith("# matrix check: ok"), done.stdout
