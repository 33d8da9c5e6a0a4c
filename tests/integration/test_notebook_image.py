"""Issue 41's notebook image in the docker tier: docker-stacks' contract with the plain `docker run`.

For the default start, another JUPYTER_PORT, a base URL, `--user 1010:100` and NB_UID=1010 started as root, the
container turns healthy and GET /api answers 200 within 20 s; a killed server, and a base URL the health check
does not read (NOTEBOOK_ARGS only), turn it unhealthy. A notebook written through the contents API into a mounted
folder belongs to the caller's UID; pip as that user adds a package, and the image's constraints refuse another
torch. (The pipeline's notebook.server check ran when the fixture built the image.)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from kit import docker

pytestmark = pytest.mark.docker

TOKEN = "torchyard-notebook-test"
CALLER = 1010  # the caller's UID (this tier runs as root: a user of uid 1010 stands for the caller)
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
BUDGET = 20.0
KILL_SERVER = """
import os, signal
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        line = open(f'/proc/{pid}/cmdline', 'rb').read()
    except OSError:
        continue
    if b'jupyter-lab' in line:
        os.kill(int(pid), signal.SIGKILL)
        print(pid)
"""


@dataclass(frozen=True)
class Started:
    id: str
    url: str  # the server's base URL on the host, ending in /
    began: float


@contextmanager
def started(image: str, *args: str, port: int = 8888, base: str = "/", env: dict[str, str] | None = None,
            command: tuple[str, ...] = ()) -> Iterator[Started]:  # fmt: skip
    settings = [item for k, v in {"JUPYTER_TOKEN": TOKEN, **(env or {})}.items() for item in ("-e", f"{k}={v}")]
    began = time.monotonic()
    run = docker("run", "-d", "-p", f"127.0.0.1::{port}", *settings, *args, image, *command)
    assert run.returncode == 0, run.stderr
    ident = run.stdout.strip()
    try:
        host_port = docker("port", ident, str(port)).stdout.split()[0].rsplit(":", 1)[1]
        yield Started(ident, f"http://127.0.0.1:{host_port}{base}", began)
    finally:
        docker("rm", "-f", ident)


def health(ident: str) -> str:
    return docker("inspect", "-f", "{{.State.Health.Status}}", ident).stdout.strip()


def wait_health(ctr: Started, want: str, budget: float) -> float:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if health(ctr.id) == want:
            return time.monotonic() - ctr.began
        time.sleep(0.5)
    logs = docker("logs", "--tail", "30", ctr.id)
    raise AssertionError(f"not {want} after {budget:.0f} s ({health(ctr.id)}):\n{logs.stdout}{logs.stderr}")


def api_status(url: str) -> int:
    try:
        return requests.get(url + "api", params={"token": TOKEN}, timeout=2).status_code
    except requests.RequestException:
        return 0


def wait_api(ctr: Started) -> float:
    while time.monotonic() - ctr.began < BUDGET:
        if api_status(ctr.url) == 200:
            return time.monotonic() - ctr.began
        time.sleep(0.25)
    raise AssertionError(f"GET {ctr.url}api did not answer 200 within {BUDGET:.0f} s")


@dataclass(frozen=True)
class Start:
    args: tuple[str, ...] = ()
    port: int = 8888
    base: str = "/"
    env: dict[str, str] | None = None


STARTS = {
    "default": Start(),
    "port": Start(port=9999, env={"JUPYTER_PORT": "9999"}),
    "base-url": Start(base="/nb/", env={"JUPYTER_BASE_URL": "/nb/"}),
    "user": Start(args=("--user", f"{CALLER}:100")),
    "root-nb-uid": Start(args=("--user", "root"), env={"NB_UID": str(CALLER)}),
}


@pytest.mark.parametrize("name", list(STARTS))
def test_the_container_turns_healthy_and_answers_within_20_s(notebook: str, name: str) -> None:
    start = STARTS[name]
    with started(notebook, *start.args, port=start.port, base=start.base, env=start.env) as ctr:
        answered = wait_api(ctr)
        healthy = wait_health(ctr, "healthy", BUDGET - (time.monotonic() - ctr.began))
        assert max(answered, healthy) <= BUDGET
        if name in ("user", "root-nb-uid"):  # the server runs as the caller's UID
            top = docker("top", ctr.id).stdout  # UID PID PPID C STIME TTY TIME CMD
            assert any(line.split()[0] == str(CALLER) and "jupyter-lab" in line for line in top.splitlines()), top


def test_a_killed_server_turns_the_container_unhealthy(notebook: str) -> None:
    command = ("bash", "-c", "start-notebook.sh & exec sleep infinity")  # the container outlives its server
    with started(notebook, command=command) as ctr:
        wait_health(ctr, "healthy", BUDGET)
        killed = docker("exec", "-u", "0", ctr.id, "python", "-c", KILL_SERVER)
        assert killed.stdout.strip(), killed.stderr
        wait_health(ctr, "unhealthy", 30.0)


def test_a_base_url_only_in_notebook_args_is_not_seen_by_the_health_check(notebook: str) -> None:
    with started(notebook, base="/hidden/", env={"NOTEBOOK_ARGS": "--ServerApp.base_url=/hidden/"}) as ctr:
        wait_api(ctr)  # the server answers under its base URL ...
        wait_health(ctr, "unhealthy", 45.0)  # ... the check asks /api: unhealthy once the start period is over


NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
# A kernel (jupyter_client, which ipykernel brings) runs a notebook cell with `%pip install`; exit 0 when the cell ran
KERNEL_PIP = """
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
said = []
cell = "%pip install tabulate\\nimport tabulate, torch\\nprint('imported', torch.__version__)"
reply = kc.execute_interactive(cell, timeout=240, output_hook=lambda m: said.append(m["content"].get("text", "")))
kc.stop_channels()
km.shutdown_kernel(now=True)
print("".join(said))
raise SystemExit(0 if reply["content"]["status"] == "ok" else 1)
"""


def test_a_notebook_written_by_the_server_belongs_to_the_caller_and_pip_keeps_torch(
    notebook: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, CALLER, 100)
    mounts = ("-v", f"{work}:/home/jovyan/work", "-v", f"{HOST_CA}:/etc/torchyard-host-ca.crt:ro")
    env = {"PIP_CERT": "/etc/torchyard-host-ca.crt"}
    with started(notebook, "--user", f"{CALLER}:100", *mounts, env=env) as ctr:
        wait_api(ctr)
        put = requests.put(
            ctr.url + "api/contents/analysis.ipynb",
            params={"token": TOKEN},
            data=json.dumps({"type": "notebook", "format": "json", "content": NOTEBOOK}),
            timeout=10,
        )
        assert put.status_code == 201, put.text
        written = work / "analysis.ipynb"
        assert (written.stat().st_uid, json.loads(written.read_text())["nbformat"]) == (CALLER, 4)

        def pip(*args: str) -> tuple[int, str]:
            run = docker("exec", "-u", f"{CALLER}:100", ctr.id, "python", "-m", "pip", "install", *args, timeout=300)
            return run.returncode, run.stdout + run.stderr

        code, said = pip("six")  # there already (python-dateutil): pip as the user says so and changes nothing
        assert code == 0, said
        # `%pip install` in a kernel, as a notebook cell runs it: tabulate is new, installed by the caller's UID
        kernel = docker("exec", "-u", f"{CALLER}:100", ctr.id, "python", "-c", KERNEL_PIP, timeout=300)
        assert kernel.returncode == 0 and "imported 2.15.0+cu132" in kernel.stdout, kernel.stdout + kernel.stderr
        torch_before = docker("exec", ctr.id, "python", "-c", "import torch; print(torch.__version__)").stdout
        code, said = pip("torch==2.14.0")
        assert code != 0 and "conflict" in said.lower(), said
        torch_after = docker("exec", ctr.id, "python", "-c", "import torch, tabulate; print(torch.__version__)")
        assert torch_after.stdout == torch_before == "2.15.0+cu132\n", torch_after.stderr
