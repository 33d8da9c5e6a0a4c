"""Issue 4 faults against the real engine and registries: each gives one clear line and leaves no tag
on a half-built or unverified image."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import RUN_ID
from kit import (
    AUTH_REGISTRY,
    AUTH_USER,
    E2E_FLAGS,
    REGISTRY,
    ROOT,
    default_sigint,
    local_tags,
    one_line_error,
    torchyard,
)

pytestmark = pytest.mark.docker
# The small CPU recipe: a failure in it costs seconds, not a CUDA build.
CPU_FLAGS = ("--torch", "2.5.1", "--variant", "cpu", "--python", "3.11", "--os", "debian12")


def test_no_daemon(tmp_path: os.PathLike[str]) -> None:
    run = torchyard("build", *E2E_FLAGS, "-o", str(tmp_path), env={"DOCKER_HOST": "unix:///tmp/no-such-docker.sock"})
    assert run.code == 3
    assert one_line_error(run) == (
        "torchyard: error: no Docker engine answers at unix:///tmp/no-such-docker.sock: "
        "start dockerd (or Docker Desktop), or set DOCKER_HOST"
    )


def test_registry_unreachable(tmp_path: os.PathLike[str]) -> None:
    repo = f"127.0.0.1:5999/torchyard-e2e/{RUN_ID}"
    run = torchyard("build", *E2E_FLAGS, "--push", "--repo", repo, "-o", str(tmp_path))
    assert run.code == 5
    assert "registry 127.0.0.1:5999 is unreachable" in one_line_error(run)
    assert local_tags(repo) == []


@pytest.mark.parametrize("password", [None, "wrong-password"])
def test_push_refused_without_valid_credentials(tmp_path: os.PathLike[str], password: str | None) -> None:
    repo = f"{AUTH_REGISTRY}/torchyard-e2e/refused-{RUN_ID}"
    auth = ("--registry-user", AUTH_USER) if password else ()
    env = {"TORCHYARD_REGISTRY_PASSWORD": password} if password else {}
    run = torchyard("build", *E2E_FLAGS, "--push", "--repo", repo, *auth, "-o", str(tmp_path), env=env)
    assert run.code == 5
    assert f"registry {AUTH_REGISTRY} refused to read torchyard-e2e/refused-{RUN_ID} (HTTP 401)" in one_line_error(run)
    assert local_tags(repo) == []


def test_a_failing_build_step_tags_nothing(tmp_path: os.PathLike[str]) -> None:
    repo = f"{REGISTRY}/torchyard-e2e/failing-{RUN_ID}"
    run = torchyard(
        "build", *E2E_FLAGS, "--pip", "torchyard-no-such-package-4d2f==0.0.1", "--repo", repo, "-o", str(tmp_path)
    )
    assert run.code == 4, run.text[-2000:]
    line = one_line_error(run)
    assert line.startswith("torchyard: error: build step [") and "torchyard-no-such-package-4d2f" in line, line
    assert local_tags(repo) == []


def test_an_index_that_refuses_connections_is_named_with_the_failing_step(tmp_path: os.PathLike[str]) -> None:
    """Nothing listens on port 9 inside a build container. Whichever step asks the index first (the uv stage's
    uv_fetch, the build stage's uv, or --pip's where those are cached), the line names it, the host and port, the
    step's last lines and the log; the index's credentials appear nowhere."""
    repo = f"{REGISTRY}/torchyard-e2e/refused-index-{RUN_ID}"
    index = "http://ci:s3cr3t@127.0.0.1:9/simple"
    run = torchyard("build", *CPU_FLAGS, "--pip-index-url", index, "--pip", "six", "--repo", repo, "-o", str(tmp_path))
    assert run.code == 4, run.text[-2000:]
    line = one_line_error(run)
    assert re.match(r"torchyard: error: build step \[[\w-]+ \d+/\d+\] RUN \S", line), line
    assert "failed (exit code " in line and "cannot connect to 127.0.0.1:9 (connection refused)" in line, line
    assert "in a RUN step 127.0.0.1 is the build container itself" in line and 'Last output: "' in line, line
    assert line.endswith(f". Log: {tmp_path}/build-runtime.log"), line
    assert "s3cr3t" not in run.text and "did not complete successfully" not in line
    assert local_tags(repo) == []


def test_sigint_during_a_build_stops_it_and_tags_nothing(tmp_path: os.PathLike[str]) -> None:
    repo = f"{REGISTRY}/torchyard-e2e/sigint-{RUN_ID}"
    # A package nobody installed before: the build has a fresh pip step to be interrupted in.
    argv = [
        sys.executable,
        "-m",
        "builder",
        "build",
        *E2E_FLAGS,
        "--pip",
        "pip-install-test==0.5",
        "--label",
        f"run={RUN_ID}",
        "--repo",
        repo,
        "-o",
        str(tmp_path),
    ]
    default_sigint()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "[runtime] building" in line:
            break
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "torchyard: error: interrupted" in err and "Traceback" not in err
    assert local_tags(repo) == []
    leftover = subprocess.run(["pgrep", "-f", f"docker build.*{tmp_path}"], capture_output=True, check=False)
    assert leftover.stdout.strip() == b""
