"""Issue 23 in the docker tier: `torchyard run` and `doctor --check` against the real engine and registry.

Two small images are built here: a one-layer image on the Debian base (for run: a container, its workspace, its
exit code, Ctrl-C; pushed to 127.0.0.1:5000 under the tag doctor chooses for this machine, for the pull), and a
CPU torch image (Debian's python3 + torch 2.13.0 from PyPI, about 1.2 GB; BuildKit caches it between sessions)
for `doctor --check`, whose probe needs torch. This machine has no GPU: the GPU part is "not checked".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RUN_ID
from kit import REGISTRY, ROOT, Run, default_sigint, docker, torchyard

pytestmark = pytest.mark.docker

REPO = f"{REGISTRY}/torchyard-run-{RUN_ID}/torch"
SMALL = f"torchyard-run-small:{RUN_ID}"
TORCH = f"torchyard-run-torch:{RUN_ID}"
USER = (1000, 1000)  # the non-root caller, when the tests run as root
TORCH_DOCKERFILE = """FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip && rm -rf /var/lib/apt/lists/*
RUN --mount=type=bind,source=wheels,target=/wheels \\
    pip3 install --break-system-packages --no-cache-dir --no-index --find-links /wheels torch
"""


def build(tag: str, context: Path, dockerfile: str) -> None:
    (context / "Dockerfile").write_text(dockerfile)
    argv = ["/usr/bin/docker", "build", "-q", "-t", tag, str(context)]
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    built = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    assert built.returncode == 0, built.stderr[-3000:]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    build(SMALL, tmp_path_factory.mktemp("small"), f'FROM debian:bookworm-slim\nLABEL io.torchyard.test="{RUN_ID}"\n')
    yield SMALL
    docker("rmi", SMALL)


@pytest.fixture(scope="module")
def torch_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """torch 2.13.0 is PyPI's CPU wheel on these machines (a local file, as for .venv-torch); the wheels are
    downloaded on the host, so the build needs Debian's mirror only."""
    context = tmp_path_factory.mktemp("torch")
    argv = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(context / "wheels")]
    got = subprocess.run([*argv, "torch==2.13.0"], capture_output=True, text=True, check=False)
    assert got.returncode == 0, got.stderr[-2000:]
    build(TORCH, context, TORCH_DOCKERFILE)
    yield TORCH
    docker("rmi", TORCH)


def containers_of(image: str) -> list[str]:
    return docker("ps", "-a", "--filter", f"ancestor={image}", "--format", "{{.Names}}").stdout.split()


def as_caller(workspace: Path, *args: str) -> list[str]:
    """`python -m builder ARGS` as a non-root caller: the tests' user, or uid 1000 (in the docker group) when that
    is root. uid 1000 cannot read root's interpreter, so it runs Debian's python3 on this checkout and its venv."""
    if os.getuid() != 0:
        return [sys.executable, "-m", "builder", *args]
    os.chown(workspace, *USER)
    group = str(os.stat("/var/run/docker.sock").st_gid)
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return ["setpriv", f"--reuid={USER[0]}", f"--regid={USER[1]}", f"--groups={group}", "env",
            f"HOME={workspace}", f"PYTHONPATH={ROOT}:{site}", "/usr/bin/python3", "-m", "builder", *args]  # fmt: skip


def caller() -> tuple[int, int]:
    return (os.getuid(), os.getgid()) if os.getuid() != 0 else USER


def test_run_starts_a_local_image_as_the_caller_and_returns_its_exit_code(small: str, tmp_path: Path) -> None:
    argv = as_caller(tmp_path, "run", small, "--", "sh", "-c", 'id -u; echo "$HOME"; pwd; touch made; exit 7')
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 7, done.stderr
    assert done.stdout.split() == [str(caller()[0]), "/tmp", "/workspace"]
    made = (tmp_path / "made").stat()
    assert (made.st_uid, made.st_gid) == caller()
    assert "the container will use the CPU" in done.stderr
    assert containers_of(small) == []


def test_run_here_pulls_the_chosen_image_from_the_team_repository(small: str, tmp_path: Path) -> None:
    recommended = json.loads(torchyard("doctor", "--json", "--repo", REPO).out)["recommended"]
    chosen = recommended["image"]
    assert chosen.startswith(f"{REPO}:")
    # the small image with the labels of the chosen combination's runtime: what the locator reads in the registry
    build(chosen, tmp_path, f"FROM {small}\n" + "".join(f"LABEL {k}={json.dumps(v)}\n" for k, v in labels(recommended)))
    for step in (("push", chosen), ("rmi", chosen)):
        assert docker(*step).returncode == 0
    assert docker("image", "inspect", chosen).returncode != 0  # not local any more
    try:
        run = _run_in(tmp_path, "run", "--here", "--", "sh", "-c", "exit 3", env={"TORCHYARD_REPO": REPO})
        assert run.code == 3, run.text
        assert f"torchyard: {chosen} is not in the local engine: pulling it" in run.err
        assert docker("image", "inspect", chosen).returncode == 0
        again = _run_in(tmp_path, "run", "--repo", REPO, "--", "true")
        assert again.code == 0 and "pulling" not in again.err  # found in the local engine now
    finally:
        docker("rmi", chosen)


def labels(recommended: dict[str, str]) -> list[tuple[str, str]]:
    """The labels render gives the recommended combination's runtime image."""
    from builder.core.kinds import Flavor, Strategy
    from builder.lock.resolve_id import find_combination
    from builder.matrix import load_matrix
    from builder.render.context import labels as image_labels
    from builder.render.options import RenderOptions

    c = find_combination(load_matrix(), recommended["id"])
    assert c is not None
    return image_labels(c, Flavor.RUNTIME, Strategy.WHEELS, c.sass or (), None, RenderOptions())


def _run_in(folder: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    done = subprocess.run([sys.executable, "-m", "builder", *args], cwd=folder, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    return Run(done.returncode, done.stdout, done.stderr)


def _interrupt(argv: list[str], image: str, folder: Path) -> tuple[int, str]:
    """Start argv, wait for its container, SIGINT torchyard alone; (its exit code, its stderr)."""
    default_sigint()
    proc = subprocess.Popen(argv, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not docker("ps", "--filter", f"ancestor={image}", "--filter", "status=running", "-q").stdout.strip():
        assert time.monotonic() < deadline and proc.poll() is None, "the container never started"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_ctrl_c_leaves_no_container(small: str, tmp_path: Path) -> None:
    assert containers_of(small) == []
    code, err = _interrupt([sys.executable, "-m", "builder", "run", small, "--", "sleep", "600"], small, tmp_path)
    assert code == 130, err
    assert "interrupted: container torchyard-run-" in err
    assert containers_of(small) == []


def test_doctor_check_passes_the_cpu_part_and_leaves_the_gpu_part_unchecked(torch_image: str) -> None:
    assert containers_of(torch_image) == []
    run = torchyard("doctor", "--check", torch_image, "--json", timeout=900)
    assert run.code == 0, run.text
    check = json.loads(run.out)["check"]
    assert check["cpu"]["status"] == "passed", check
    assert check["gpu"]["status"] == "not checked"
    assert (check["torch"], check["cuda"], check["cuda_available"], check["devices"]) == ("2.13.0+cpu", None, False, [])
    assert check["docker_run"].startswith("docker run --rm --name torchyard-check-")
    assert containers_of(torch_image) == []


def test_doctor_check_interrupted_leaves_no_container(torch_image: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "builder", "doctor", "--check", torch_image]
    code, err = _interrupt(argv, torch_image, tmp_path)
    assert code == 130, err
    assert containers_of(torch_image) == []
