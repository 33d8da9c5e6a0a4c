"""The README's main job and the docker tier's shared e2e image are one combination: what `torchyard build --arch
sm_89` chooses on a machine without a GPU is the combination tests/integration/kit.py builds (E2E_ID), so the
tour test reuses the e2e build's cache instead of building another CUDA image."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
MAIN_JOB = "scripts/setup --engine && scripts/torchyard build --arch sm_89"


def e2e_id() -> str:
    """kit.py's E2E_ID, read as text (the docker tier's kit is not importable from the unit tier)."""
    found = re.search(r'^E2E_ID = "([^"]+)"$', (ROOT / "tests" / "integration" / "kit.py").read_text(), re.M)
    assert found is not None
    return found[1]


def test_the_readme_main_job_builds_the_e2e_combination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert MAIN_JOB in readme
    flags = re.search(r"scripts/torchyard build (.*)$", MAIN_JOB)
    assert flags is not None
    with pytest.raises(SystemExit) as done:
        main(["render", "--any-host", *flags[1].split(), "-o", str(tmp_path / "ctx")])
    assert done.value.code == 0
    capsys.readouterr()
    plan = json.loads((tmp_path / "ctx" / "plan.json").read_text(encoding="utf-8"))
    assert plan["id"] == e2e_id()
