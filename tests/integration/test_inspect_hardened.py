"""Issue 18 in the docker tier: inspect on an image with no Python says so in one line, exits 2 (README's
table: an input inspect cannot read), and leaves no container behind, run after run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kit import docker, torchyard

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
