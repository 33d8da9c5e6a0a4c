"""The lock, enforced in the image and exported from it (issue 19, item 6): on the layer tests' small torch
family image (wheels of a few hundred KB from a local index: the whole exported set is installed), and on the
e2e runtime image (the real CUDA 13 torch).

Installing the exported set in full downloads some 4 GB (torch and the CUDA 13 libraries), so the test splits
what it proves: pip, asked to resolve the exported pins afresh from PyPI (`--dry-run --report`: metadata only),
chooses exactly the files the lock names (same sha256) and nothing more; and the distributions under 3 MB are
really installed from requirements.txt with `--require-hashes` into a fresh venv, whose `pip freeze` is then
the image's for those distributions.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import E2E
from index_server import Index, serving
from kit import docker, torchyard
from layer_kit import Built, build, family_index

from builder.core.kinds import Installer

pytestmark = pytest.mark.docker

CONSTRAINTS = "/opt/torchyard/image-constraints.txt"
SMALL = 3_000_000  # bytes: the files the test really downloads and installs


def _in_image(ref: str, *command: str, env: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    flags = [item for pair in (("-e", e) for e in env) for item in pair]
    return docker("run", "--rm", "--network", "none", *flags, "--entrypoint", command[0], ref, *command[1:])


def _freeze(ref: str) -> set[str]:
    """`pip freeze --all`, names normalised as the lock writes them (typing_extensions -> typing-extensions)."""
    done = _in_image(ref, "pip", "freeze", "--all")
    assert done.returncode == 0, done.stderr
    return {_normal(line) for line in done.stdout.splitlines() if line.strip()}


def _normal(line: str) -> str:
    name, _, version = line.strip().partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Built, Index, Path]]:
    folder = tmp_path_factory.mktemp("lock-small")
    with serving(family_index()) as index:
        image = build(index, "2.14.1", Installer.UV, folder, f"lock-small-{RUN}")
        try:
            yield image, index, folder
        finally:
            docker("rmi", image.ref)


def test_in_a_small_image_a_conflicting_install_names_the_constraints(small: tuple[Built, Index, Path]) -> None:
    image, _, _ = small
    refused = _in_image(image.ref, "pip", "install", "--no-index", "torch==2.13.0")
    text = refused.stdout + refused.stderr
    assert refused.returncode == 1, text
    assert "The user requested (constraint) torch==2.14.1" in text
    assert f"pins its verified packages in {CONSTRAINTS} (PIP_CONSTRAINT)" in text


def test_lock_export_of_a_small_image_installs_its_exact_pip_freeze(
    small: tuple[Built, Index, Path], tmp_path: Path
) -> None:
    image, index, _ = small
    run = torchyard("lock", "export", image.ref, "-o", str(tmp_path / "lock"), "--index-url", f"{index.url}/simple")
    assert run.code == 0, run.text[-3000:]
    assert "left out" not in run.out
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "--isolated", "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "install", "--quiet", "--require-hashes", "-r", str(tmp_path / "lock" / "requirements.txt")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = subprocess.run([*pip, "freeze", "--all"], capture_output=True, text=True, check=True).stdout
    assert {_normal(line) for line in fresh.split()} == _freeze(image.ref)


def test_a_conflicting_pip_install_names_the_image_constraints(e2e: E2E) -> None:
    ref = e2e.ref("runtime")
    # --no-index: the conflict is found without asking an index (and the container has no network)
    refused = _in_image(ref, "pip", "install", "--no-index", "torch==2.5.1")
    text = refused.stdout + refused.stderr
    assert refused.returncode == 1, text
    assert "The user requested (constraint) torch==2.14.1" in text
    assert f"pins its verified packages in {CONSTRAINTS} (PIP_CONSTRAINT)" in text
    assert "PIP_CONSTRAINT= pip install" in text
    lifted = _in_image(ref, "pip", "install", "--no-index", "torch==2.5.1", env=("PIP_CONSTRAINT=",))
    assert lifted.returncode == 1 and "(constraint)" not in lifted.stdout + lifted.stderr  # no index, no torch
    env = _in_image(ref, "sh", "-c", 'echo "$PIP_CONSTRAINT $UV_CONSTRAINT"').stdout.split()
    assert env == [CONSTRAINTS, CONSTRAINTS]
