"""notebook.server and gpu.notebook: the notebook image's JupyterLab server and kernel, as a user meets them.

notebook.server starts the image's own start-notebook.sh (start.sh, the hooks, the image's user) on a free port
of the loopback with a token of its own in JUPYTER_TOKEN; GET /api must answer 200 within the budget, /api/kernels
must refuse a request without the token (403) and answer one with it; the server must start a kernel (POST
/api/kernels) and delete it; a kernel started with jupyter_client (which ipykernel brings) must run `import torch`
and report its version. Then the kernels and the server are stopped. gpu.notebook starts a kernel that must see the GPU
(torch.cuda.is_available() and a device count); without a GPU it is skipped, never passed.

Images of other flavors skip both; a notebook image without jupyter_client or start-notebook.sh fails.
What it cannot show: that the JupyterLab front end renders in a browser, that the published port is reachable
from the host (the docker tier checks that, with the HEALTHCHECK), or extensions beyond ipywidgets.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from . import procs
from .checks_gpu import _cuda
from .framework import Context, Failed, Skipped, check

SERVER_COMMAND = "start-notebook.sh"
START_BUDGET = 60.0  # seconds for the server's first 200 on /api
KERNEL_BUDGET = 60.0
PROBE = (
    "import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.cuda.is_available(), "
    "'devices': torch.cuda.device_count() if torch.cuda.is_available() else 0}))"
)
# What the caller's environment may set that would move the server away from the port and URL the check asks
UNSET = ("JUPYTER_BASE_URL", "NOTEBOOK_ARGS", "RESTARTABLE", "JUPYTER_TOKEN", "JUPYTER_PORT")


def notebook_image(ctx: Context) -> None:
    """Skipped unless the image is a notebook image."""
    if ctx.expect.flavor != "notebook":
        raise Skipped("not a notebook image")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(base: dict[str, str], port: int, token: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in UNSET}
    env.update(JUPYTER_PORT=str(port), JUPYTER_TOKEN=token)
    return env


def request(url: str, token: str | None = None, method: str = "GET", timeout: float = 5.0) -> tuple[int, Any]:
    """(status, the JSON body or None); status 0: no answer (refused, timed out)."""
    headers = {"Authorization": f"token {token}"} if token else {}
    data = b"{}" if method == "POST" else None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with opener.open(req, timeout=timeout) as response:
            body = response.read()
            return int(response.status), json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


@contextmanager
def server(token: str, scale: float) -> Iterator[str]:
    """The image's start-notebook.sh on a free loopback port; yields its base URL; stops the whole group."""
    command = shutil.which(SERVER_COMMAND)
    if command is None:
        raise Failed(f"a notebook image without {SERVER_COMMAND} on PATH")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="torchyard-notebook-")
    log = os.path.join(folder, "server.log")
    started = procs.start([command], log, env=server_env(dict(os.environ), port, token))
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for_api(url, started, START_BUDGET * scale)
        yield url
    finally:
        procs.stop(started.proc)
        shutil.rmtree(folder, ignore_errors=True)


def wait_for_api(url: str, started: procs.Started, budget: float) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if started.proc.poll() is not None:
            raise Failed(f"the server exited {started.proc.returncode} before answering: {procs.tail(started.log)}")
        if request(url + "api", timeout=2.0)[0] == 200:
            return
        time.sleep(0.25)
    raise Failed(f"GET {url}api did not answer 200 within {budget:.0f} s: {procs.tail(started.log)}")


def kernel_through_server(url: str, token: str) -> None:
    """The server starts a kernel (POST /api/kernels: 201 once its process is up), lists it, and deletes it (204).
    (Its execution state stays "starting" until a websocket client asks it for its info: not read here.)"""
    status, kernel = request(url + "api/kernels", token, "POST", timeout=KERNEL_BUDGET)
    if status != 201 or not isinstance(kernel, dict):
        raise Failed(f"POST {url}api/kernels answered {status}, not 201 with the kernel")
    ident = str(kernel.get("id"))
    listed = request(f"{url}api/kernels/{ident}", token)[0]
    deleted = request(f"{url}api/kernels/{ident}", token, "DELETE", timeout=KERNEL_BUDGET)[0]
    if (listed, deleted) != (200, 204):
        raise Failed(f"the server's kernel {ident}: GET answered {listed} (not 200), DELETE {deleted} (not 204)")


def run_in_kernel(code: str, budget: float) -> dict[str, Any]:
    """`code` in a fresh python3 kernel (jupyter_client); the JSON line it printed."""
    try:
        from jupyter_client.manager import start_new_kernel
    except ImportError as exc:
        raise Failed(f"a notebook image without jupyter_client: {exc}") from None
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=budget)
    printed: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        if message.get("msg_type") == "stream" and message["content"].get("name") == "stdout":
            printed.append(str(message["content"].get("text", "")))

    try:
        reply = client.execute_interactive(code, timeout=budget, output_hook=hook)
    finally:
        client.stop_channels()
        with suppress(Exception):  # the verdict is the reply's; a slow shutdown is not this check's
            manager.shutdown_kernel(now=True)
    return kernel_result(reply, "".join(printed))


def kernel_result(reply: dict[str, Any], printed: str) -> dict[str, Any]:
    content = reply.get("content", {})
    if content.get("status") != "ok":
        raise Failed(f"the kernel's `import torch` failed: {content.get('ename')}: {content.get('evalue')}"[:600])
    lines = [line for line in printed.splitlines() if line.startswith("{")]
    if not lines:
        raise Failed(f"the kernel printed no report: {printed[-300:]!r}")
    return dict(json.loads(lines[-1]))


@check("notebook.server", timeout=240.0)
def notebook_server(ctx: Context) -> str:
    notebook_image(ctx)
    token = secrets.token_hex(16)
    with server(token, ctx.timeout_scale) as url:
        anonymous = request(url + "api/kernels")[0]
        if anonymous != 403:
            raise Failed(f"GET {url}api/kernels without the token answered {anonymous}, not 403")
        status = request(url + "api/kernels", token)[0]
        if status != 200:
            raise Failed(f"GET {url}api/kernels with the token answered {status}, not 200")
        kernel_through_server(url, token)
    found = run_in_kernel(PROBE, KERNEL_BUDGET * ctx.timeout_scale)
    ctx.observed["notebook"] = found
    return (
        f"start-notebook.sh answered GET /api (200), the token guards /api/kernels (403 without, 200 with), "
        f"the server started and deleted a kernel, a kernel ran `import torch` ({found.get('torch')})"
    )


@check("gpu.notebook", gpu=True, timeout=180.0)
def notebook_gpu(ctx: Context) -> str:
    _cuda(ctx)  # skipped without a GPU (or with a CPU build), failed where the container sees one CUDA does not
    notebook_image(ctx)
    found = run_in_kernel(PROBE, KERNEL_BUDGET * ctx.timeout_scale)
    if not found.get("cuda") or not found.get("devices"):
        raise Failed(f"torch sees the GPU, the notebook's kernel does not: {found}")
    return f"a kernel's torch {found.get('torch')} sees {found['devices']} GPU(s): torch.cuda.is_available() True"
