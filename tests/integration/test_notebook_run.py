"""Issue 41 items 2 and 3 in the docker tier: `torchyard run --notebook` and `torchyard devcontainer` against the
real engine, with the small notebook image the `notebook` fixture builds (conftest.py; the e2e combination).

- run --notebook --detach: the printed URL and its token answer 200 on /api (and the token opens /api/contents),
  then the container is removed; its dry run publishes the port with -p, has no --network host, the caller's UID;
- devcontainer: the file it writes is brought up by the devcontainers CLI from npm (scripts/setup installs
  @devcontainers/cli into .tools/devcontainers) and `python -c "import torch"` runs in it.

This machine has no GPU: the GPU flags themselves are the unit tier's (tests/unit/test_run_notebook.py,
test_devcontainer.py, on every recorded machine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import ROOT, docker, torchyard

from builder.host.identity import caller

pytestmark = pytest.mark.docker

CLI = ROOT / ".tools" / "devcontainers" / "node_modules" / ".bin" / "devcontainer"
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]+)")
NAME = re.compile(r"running in (torchyard-notebook-[0-9a-f]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return int(reply.status)


@pytest.fixture
def started(notebook: str, tmp_path: Path) -> Iterator[tuple[int, str, str]]:
    """(port, token, container name) of `torchyard run --notebook --detach --port P IMAGE`, typed in tmp_path (its
    work folder); removed after."""
    port = free_port()
    ran = torchyard(
        "run", "--notebook", "--detach", "--force", "--port", str(port), notebook, timeout=300, cwd=tmp_path
    )
    found, name = URL.fullmatch(ran.out.strip()), NAME.search(ran.err)
    try:
        assert ran.code == 0, ran.err[-3000:]
        assert found is not None and name is not None, ran.out + ran.err
        yield int(found[1]), found[2], name[1]
    finally:
        if name is not None:
            docker("rm", "-f", name[1])


def test_run_notebook_prints_a_url_whose_token_opens_the_server(started: tuple[int, str, str]) -> None:
    port, token, name = started
    assert get(f"http://127.0.0.1:{port}/api") == 200
    assert get(f"http://127.0.0.1:{port}/api/contents", token) == 200
    health = docker("inspect", "--format", "{{.State.Health.Status}}", name)
    assert health.stdout.strip() == "healthy"
    token_seen = docker("inspect", "--format", "{{json .Config.Env}}", name)
    assert f"JUPYTER_TOKEN={token}" in token_seen.stdout  # given by name, its value from the CLI's environment
    assert token not in docker("inspect", "--format", "{{json .Args}}", name).stdout


def test_a_notebook_saved_from_the_server_is_the_callers_in_the_folder(
    started: tuple[int, str, str], tmp_path: Path
) -> None:
    port, token, _ = started
    body = json.dumps(
        {"type": "notebook", "content": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}}
    )
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/saved.ipynb", data=body.encode(),
                                     method="PUT", headers={"Authorization": f"token {token}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status in (200, 201)
    saved = tmp_path / "saved.ipynb"
    assert saved.is_file() and saved.stat().st_uid == os.getuid(), "the caller's, in the folder run was typed in"


def test_run_notebook_dry_run_publishes_the_port_without_host_network(notebook: str) -> None:
    ran = torchyard("run", "--notebook", "--dry-run", "--force", "--port", "9876", notebook, timeout=300)
    assert ran.code == 0, ran.err
    argv = shlex.split(ran.out)
    assert argv[argv.index("-p") + 1] == "127.0.0.1:9876:8888"
    assert not any(a.startswith(("--network", "--net")) for a in argv)
    assert argv[argv.index("--user") + 1] == caller().user
    assert argv[argv.index("--group-add") + 1] == "100"
    assert argv[-1] == notebook


def test_devcontainer_up_and_import_torch(notebook: str, tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.fail("the devcontainers CLI is not installed: run scripts/setup (it needs npm)", pytrace=False)
    folder = tmp_path / "project"
    folder.mkdir()
    target = folder / ".devcontainer" / "devcontainer.json"
    wrote = torchyard("devcontainer", notebook, "-o", str(target), timeout=120)
    assert wrote.code == 0, wrote.err
    assert json.loads(target.read_text())["image"] == notebook
    base = [str(CLI), "--workspace-folder", str(folder), "--docker-path", "/usr/bin/docker"]
    up = subprocess.run([base[0], "up", *base[1:]], capture_output=True, text=True, timeout=900, check=False)
    container = _container_id(up.stdout)
    try:
        assert up.returncode == 0 and container, (up.stdout + up.stderr)[-4000:]
        code = "import torch, os; print(torch.__version__, os.getcwd())"
        ran = subprocess.run([base[0], "exec", *base[1:], "python", "-c", code],
                             capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
        assert ran.stdout.strip().endswith("/home/jovyan/work")
    finally:
        if container:
            image = docker("inspect", "--format", "{{.Config.Image}}", container).stdout.strip()
            docker("rm", "-f", container)
            if image.startswith("vsc-"):  # updateRemoteUserUID's image, built on the notebook image
                docker("rmi", image)


def _container_id(stdout: str) -> str | None:
    """`devcontainer up` ends with one JSON line: {"outcome": "success", "containerId": ...}."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("containerId"):
            return str(found["containerId"])
    return None
