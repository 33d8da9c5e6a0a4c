"""Issue 9 in the docker tier: `torchyard inspect` on an image built here (labels and manifest) and on one
without torchyard's labels (a probe in a container), and whether each runs on a driver and GPU."""

from __future__ import annotations

import json

import pytest
from conftest import E2E
from kit import torchyard

pytestmark = pytest.mark.docker


def test_a_torchyard_image_is_read_from_its_labels_and_manifest(e2e: E2E) -> None:
    run = torchyard("inspect", e2e.ref("runtime"), "--json")
    assert run.code == 0, run.text
    data = json.loads(run.out)
    assert data["read_from"] == "torchyard labels and manifest"
    assert (data["combination"], data["torch"], data["cuda"]) == (
        "torch2.15.0-cu132-py3.13-debian13",
        "2.15.0+cu132",
        "13.2",
    )
    assert data["runs"] is None


def test_a_torchyard_image_runs_on_580_and_not_on_535(e2e: E2E) -> None:
    ok = torchyard("inspect", e2e.ref("runtime"), "--driver", "580.65.06", "--gpu", "RTX 4090")
    assert ok.code == 0, ok.text
    assert "RUNS" in ok.out
    old = torchyard("inspect", e2e.ref("runtime"), "--driver", "535", "--gpu", "RTX 4090", "--json")
    assert old.code == 1, old.text
    failed = {c["rule"] for c in json.loads(old.out)["checks"] if not c["ok"]}
    assert "driver-cuda" in failed


def test_a_foreign_image_is_probed_and_judged(foreign: str) -> None:
    run = torchyard("inspect", foreign, "--driver", "580.65.06", "--arch", "sm_89", "--json")
    assert run.code == 0, run.text
    data = json.loads(run.out)
    assert (data["read_from"], data["torch"], data["cuda"], data["nvidia_require_cuda"]) == (
        "probe", "2.15.0+cu132", "13.2", "cuda>=13.0"
    )  # fmt: skip
    assert "sm_86" in data["sass"]  # what the wheel carries: sm_89 runs its sm_86 code
    refused = torchyard("inspect", foreign, "--driver", "570.124.06", "--arch", "sm_89", "--json")
    assert refused.code == 1
    failed = {c["rule"] for c in json.loads(refused.out)["checks"] if not c["ok"]}
    assert {"driver-cuda", "container-start"} <= failed
