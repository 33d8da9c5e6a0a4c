"""Issue 18 in the docker tier: inspect on an image with no Python says so in one line, exits 2 (README's
table: an input inspect cannot read), and leaves no container behind, run after run; an image only in a
registry is read from its config by digest (torchyard's from its labels), and nothing is pulled."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import REGISTRY, docker, torchyard

pytestmark = pytest.mark.docker


@pytest.fixture
def no_python() -> Iterator[str]:
    """debian:bookworm-slim under a tag of this test's own: its containers are told apart from everyone's."""
    tag = f"honest-nopython:{uuid.uuid4().hex[:8]}"
    assert docker("tag", "debian:bookworm-slim", tag).returncode == 0
    yield tag
    docker("rmi", tag)  # the tag only: debian:bookworm-slim stays


def containers_of(image: str) -> list[str]:
    listed = docker("ps", "-a", "--format", "{{.ID}} {{.Image}}").stdout.splitlines()
    return [line.split()[0] for line in listed if line.split()[1:] == [image]]


def test_an_image_without_python_three_times_one_line_exit_2_no_container_left(no_python: str) -> None:
    assert containers_of(no_python) == []
    for _ in range(3):
        run = torchyard("inspect", no_python)
        assert run.code == 2, run.text
        assert run.out == ""
        assert run.err.strip().splitlines() == [f"torchyard: error: inspect: no torch in {no_python} (no Python in it)"]
        assert containers_of(no_python) == []


@pytest.fixture
def only_in_registry(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A torchyard-labelled image and a plain one, pushed to the local registry and removed from the engine."""
    run_id = uuid.uuid4().hex[:8]
    combo = "torch2.14.1-cu130-py3.11-debian12"
    labels = {"version": "0.1.0", "combination": combo, "torch": "2.14.1+cu130", "cuda": "13.0",
              "python": "3.11", "os": "debian12"}  # fmt: skip
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\n" + "".join(f'LABEL io.torchyard.{k}="{v}"\n' for k, v in labels.items())
        + 'ENV NVIDIA_REQUIRE_CUDA="cuda>=13.0"\n'
    )  # fmt: skip
    ours, plain = f"{REGISTRY}/honest-remote/ours:{run_id}", f"{REGISTRY}/honest-remote/plain:{run_id}"
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    built = subprocess.run(["/usr/bin/docker", "build", "-q", "-t", ours, str(tmp_path)], env=env, capture_output=True,
                           text=True, check=True).stdout.strip()  # fmt: skip
    assert docker("tag", "debian:bookworm-slim", plain).returncode == 0
    for ref in (ours, plain):
        assert docker("push", ref).returncode == 0
        assert docker("rmi", ref).returncode == 0  # only the tag goes; the labelled image's id below
    docker("rmi", built)
    yield ours, plain


def engine_images() -> set[str]:
    return set(docker("images", "-a", "-q", "--no-trunc").stdout.split())


def test_an_image_only_in_the_local_registry_is_inspected_without_a_pull(only_in_registry: tuple[str, str]) -> None:
    ours, plain = only_in_registry
    before = engine_images()
    run = torchyard("inspect", ours, "--driver", "580.65.06", "--gpu", "RTX 4090", "--json")
    assert run.code == 0, run.text
    data = json.loads(run.out)
    assert data["read_from"].startswith(f"torchyard labels ({REGISTRY} by digest sha256:")
    assert (data["combination"], data["torch"], data["verdict"]) == (
        "torch2.14.1-cu130-py3.11-debian12",
        "2.14.1+cu130",
        "runs",
    )
    assert "sm_86" in data["sass"]  # the compiled architectures, from the matrix for its combination
    foreign = torchyard("inspect", plain, "--driver", "580.65.06", "--gpu", "RTX 4090")
    assert foreign.code == 6, foreign.text
    assert "not read: torch, CUDA" in foreign.out and "--pull to probe" in foreign.out and "CANNOT TELL" in foreign.out
    assert engine_images() == before  # nothing was pulled
