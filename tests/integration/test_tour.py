"""The first hour (issue 38): the README's main job and tour, typed as a newcomer types them, by the plain
`torchyard` command that scripts/setup puts on PATH, on this machine without a GPU.

The main job (`torchyard build --arch sm_89`) builds the README's combination, the docker tier's shared e2e
combination, so its venv comes from the e2e build's cache. Then: `torchyard doctor` names that image (local, not
the recommended CPU image, it runs on this machine's CPU), `torchyard run -- python -c ...` starts it without a
build, `torchyard doctor --check` passes its CPU part, and `inspect --here` says RUNS ON CPU. Through sudo's path
(root with SUDO_UID/SUDO_GID), the container runs as that caller, with a name, also with --read-only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import E2E
from kit import E2E_ID, ROOT, docker

pytestmark = pytest.mark.docker

PRINT_VERSION = "import torch; print(torch.__version__)"


@dataclass(frozen=True)
class Typed:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Tour:
    command: str  # the `torchyard` on PATH
    folder: Path  # where the user types (their project folder)
    image: str  # what the main job built

    def type(self, *args: str, env: dict[str, str] | None = None, timeout: float = 1800) -> Typed:
        done = subprocess.run([self.command, *args], cwd=self.folder, env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
        return Typed(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def tour(e2e: E2E, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    command = shutil.which("torchyard")
    assert command, "no `torchyard` on PATH: scripts/setup links scripts/torchyard there (the README's set-up)"
    assert Path(command).resolve() == ROOT / "scripts" / "torchyard", f"{command} is not this checkout's launcher"
    folder = tmp_path_factory.mktemp("project")
    typed = Tour(command, folder, "").type("build", "--arch", "sm_89")  # the README's main job, as typed
    assert typed.code == 0, (typed.out + typed.err)[-4000:]
    built = [line.split()[2] for line in typed.out.splitlines() if line.startswith("runtime ") and " built " in line]
    assert built and built[0].startswith("torchyard:") and built[0].endswith("-runtime-sm89"), typed.out[-2000:]
    tags = json.loads(docker("image", "inspect", built[0]).stdout)[0]["RepoTags"]
    yield Tour(command, folder, built[0])
    docker("rmi", *tags)


def test_doctor_names_the_image_the_main_job_built_as_the_one_to_run_here(tour: Tour) -> None:
    typed = tour.type("doctor")
    assert typed.code == 0, typed.err
    where = next(line for line in typed.out.splitlines() if line.startswith("  where:"))
    assert "not the recommended image" in where and f"(it holds {E2E_ID})" in where, typed.out
    assert "it runs on this machine's CPU" in where
    data = json.loads(tour.type("doctor", "--json").out)
    assert data["recommended"]["id"] == E2E_ID.replace("-cu132-", "-cpu-")  # no GPU: the CPU image is recommended
    found = data["recommended"]["where"]
    assert (found["where"], found["recommended"], found["holds"], found["verdict"]) == (
        "local engine", False, E2E_ID, "runs-cpu"
    )  # fmt: skip
    assert data["recommended"]["run"] == (
        f'docker run --rm -it --ipc=host -v "$PWD":/workspace -w /workspace {found["reference"]} python'
    )


def test_run_starts_it_without_a_build_and_the_command_s_exit_code_is_the_container_s(tour: Tour) -> None:
    typed = tour.type("run", "--", "python", "-c", PRINT_VERSION)
    assert typed.code == 0, typed.err
    assert typed.out.strip().splitlines()[-1] == "2.15.0+cu132"
    assert "building" not in typed.err and "the container will use the CPU" in typed.err
    assert tour.type("run", "--", "python", "-c", "raise SystemExit(3)").code == 3


def test_doctor_check_passes_the_cpu_part_and_leaves_the_gpu_part_unchecked(tour: Tour) -> None:
    typed = tour.type("doctor", "--check")
    assert typed.code == 0, typed.out[-3000:] + typed.err
    assert "  CPU part: PASSED: torch 2.15.0+cu132, CUDA 13.2" in typed.out, typed.out[-3000:]
    assert "  GPU part: NOT CHECKED: no GPU on this machine" in typed.out


def test_inspect_here_says_it_runs_on_this_machine_s_cpu(tour: Tour) -> None:
    typed = tour.type("inspect", tour.image, "--here")
    assert typed.code == 0, typed.out + typed.err
    assert "linux/amd64: RUNS ON CPU" in typed.out


def test_through_sudo_the_container_runs_as_the_caller_with_a_name_also_read_only(tour: Tour) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root: the sudo path is root with SUDO_UID/SUDO_GID (CI runs as root)")
    os.chmod(tour.folder, 0o777)  # uid 1000 writes into the project folder as the user would own it
    sudo = {"SUDO_UID": "1000", "SUDO_GID": "1000", "SUDO_USER": "ana"}
    dry = tour.type("run", "--dry-run", tour.image, "--", "id", env=sudo)
    assert "--user 1000:1000" in dry.out and "-e USER=ana -e LOGNAME=ana" in dry.out, dry.out
    script = 'whoami; python -c "import getpass; print(getpass.getuser())"; touch /workspace/made-by-ana'
    typed = tour.type("run", tour.image, "--", "sh", "-c", script, env=sudo)
    assert typed.code == 0, typed.err
    assert typed.out.split() == ["ana", "ana"]
    made = (tour.folder / "made-by-ana").stat()
    assert (made.st_uid, made.st_gid) == (1000, 1000)
    locked = tour.type("run", tour.image, "--", "--read-only", "--", "sh", "-c", "whoami; touch ~/x && echo ok",
                       env=sudo)  # fmt: skip
    assert (locked.code, locked.out.split()) == (0, ["ana", "ok"]), locked.err
    assert "--read-only: /tmp (the container's HOME) is a tmpfs" in locked.err
