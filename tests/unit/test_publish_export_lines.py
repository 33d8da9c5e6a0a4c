"""The GitHub Actions matrix's smoke and publish lines, word for word, for a CUDA item with the GPUs named, with
--gpus given empty, and for a CPU item. Written for the survivors of `bench/mutation.py publish`
(docs/mutation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from publish_kit import matrix_with

from builder.publish.export import github_matrix
from builder.publish.items import expand
from builder.publish.plan import plan_publish

SET = """
[[publish]]
name = "pair"
torch = "==2.14.1"
variants = ["cu130", "cpu"]
os = ["debian12"]
flavors = ["runtime"]
"""
REPO = "ghcr.io/acme/torch"
CANDIDATES = "ghcr.io/acme/torch-candidates"


def jobs(tmp_path: Path, gpus: str | None) -> dict[str, dict[str, Any]]:
    m = matrix_with(SET, tmp_path)
    found = github_matrix(plan_publish(m, expand(m)[0], []), REPO, CANDIDATES, gpus)["include"]
    return {j["id"].split("-")[1]: j for j in found}


@pytest.mark.parametrize(("gpus", "flag"), [("0,1", "0,1"), ("", "all")])
def test_a_cuda_job_smokes_and_publishes_on_the_gpus_named(tmp_path: Path, gpus: str, flag: str) -> None:
    cuda = jobs(tmp_path, gpus)["cu130"]
    candidate = f"{CANDIDATES}:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
    assert cuda["smoke"] == f"docker pull {candidate} && torchyard smoke {candidate} --gpus {flag} --require-gpu"
    assert cuda["publish"] == f"torchyard publish --only {cuda['id']} --repo {REPO} --no-aliases --gpus {flag}"


def test_a_cpu_job_smokes_and_publishes_without_gpus(tmp_path: Path) -> None:
    cpu = jobs(tmp_path, "all")["cpu"]
    candidate = cpu["smoke"].split()[2]
    assert cpu["smoke"] == f"docker pull {candidate} && torchyard smoke {candidate}"
    assert cpu["publish"] == f"torchyard publish --only {cpu['id']} --repo {REPO} --no-aliases"
