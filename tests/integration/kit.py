"""Helpers for the docker tier: run torchyard as users do, talk to the real engine and registries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CI_DIR = Path(os.environ.get("TORCHYARD_CI_DIR", "/tmp/torchyard-ci"))
REGISTRY = "127.0.0.1:5000"
AUTH_REGISTRY = "127.0.0.1:5001"
AUTH_USER = "torchyard"
# The e2e combination: the README's main job (`torchyard build --arch sm_89` on a machine without a GPU chooses it;
# tests/unit/test_readme_job.py holds the two together), so the tour test reuses its build cache.
E2E_TORCH = "2.15.0"
E2E_FLAGS = ("--torch", E2E_TORCH, "--os", "debian13", "--python", "3.13")
E2E_ID = "torch2.15.0-cu132-py3.13-debian13"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def torchyard(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 3600, cwd: Path = ROOT
) -> Run:
    """`python -m builder ...` in a subprocess, exactly as the console command runs (in `cwd`, the repository by
    default). Builds choose for any machine (TORCHYARD_ANY_HOST=1): what they build must not depend on the GPU of
    the machine running the tests."""
    merged = {**os.environ, "TORCHYARD_ANY_HOST": "1", **(env or {})}
    if cwd != ROOT:  # `-m builder` from another folder: this checkout's package
        merged["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "builder", *args],
        cwd=cwd,
        env=merged,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def registry_password() -> str:
    return (CI_DIR / "registry-password").read_text().strip()


def docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/usr/bin/docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


def local_tags(repo: str) -> list[str]:
    listed = docker("images", "--format", "{{.Repository}}:{{.Tag}}", repo).stdout.split()
    return [ref for ref in listed if not ref.endswith(":<none>")]


def untag_repo(repo: str) -> None:
    for ref in local_tags(repo):
        docker("rmi", "--no-prune", ref)


def remove_images_of_run(run_id: str) -> None:
    """Everything the session tagged (its repositories carry the run id), then what that leaves dangling:
    the tests' images are GBs each, and a CI machine's disk is shared."""
    listed = docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    refs = [ref for ref in listed if run_id in ref]
    if refs:
        docker("rmi", "-f", *refs)
    docker("image", "prune", "-f", "--filter", "label=io.torchyard.version")


def one_line_error(run: Run) -> str:
    """The error contract: exactly one line on stderr, 'torchyard: error: ...', no traceback."""
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert "Traceback" not in run.text, run.text[-2000:]
    assert len(lines) == 1, run.err
    assert lines[0].startswith("torchyard: error: "), run.err
    return lines[0]


def default_sigint() -> None:
    """Before starting a child that a test interrupts: a shell that starts a job in the background
    (`.ci/run &`, nohup) makes it ignore SIGINT, and an ignored signal stays ignored across exec. With
    Python's own handler here, children start with the default disposition, as under a terminal."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
