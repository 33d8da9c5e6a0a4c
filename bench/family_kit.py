"""What bench/family_bench.py measures with: a registry whose storage it can count, a docker CLI that builds with
fresh caches, and an engine that has never seen the images, for pulls.

- `Registry`: docker-registry on a free port over a fresh folder. Bytes pushed = what the folder gained.
- `cold_docker()`: a docker CLI for torchyard (TORCHYARD_DOCKER) that gives every BuildKit cache mount of a build
  an id of this run (`id=uv-debian12` -> `id=uv-debian12-bench<nonce>`) and adds `--no-cache` while
  BENCH_NO_CACHE=1: a cold build without pruning the engine's caches, which other people's builds share.
- `PullEngine`: a throwaway dockerd with its own data root, in a network namespace of its own (a dockerd without
  a bridge deletes the host's docker0 at start; inside its own namespace there is none), next to a second
  docker-registry serving the same storage there. A pull's bytes are the compressed sizes of the layers it did
  not find ("Already exists"). The build engine cannot stand in: its build cache holds every layer it built,
  so its pulls say "Already exists" even after the images are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import requests

DOCKER = "/usr/bin/docker"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait(url: str, what: str) -> None:
    for _ in range(100):
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not answer at {url}")


@dataclass(frozen=True)
class Manifest:
    digest: str
    layers: list[tuple[str, int]]  # (blob digest, compressed bytes), base first
    config: str

    @property
    def size(self) -> int:
        """The image's compressed size: what a pull into an empty engine downloads."""
        return sum(size for _, size in self.layers)


class Registry:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.storage = folder / "storage"
        folder.mkdir(parents=True, exist_ok=True)
        self.config = folder / "registry.yml"
        self.config.write_text(f"version: 0.1\nstorage: {{filesystem: {{rootdirectory: {self.storage}}}}}\n"
                               f"http: {{addr: 127.0.0.1:{self.port}}}\n")  # fmt: skip
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait(f"http://127.0.0.1:{self.port}/v2/", "docker-registry")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stored(self) -> int:
        return sum(p.stat().st_size for p in self.storage.rglob("*") if p.is_file())

    def manifest(self, repo: str, tag: str) -> Manifest:
        reply = requests.get(
            f"http://{self.host}/v2/{repo}/manifests/{tag}",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
            timeout=30,
        )
        reply.raise_for_status()
        data = reply.json()
        layers = [(layer["digest"], int(layer["size"])) for layer in data["layers"]]
        return Manifest(reply.headers["Docker-Content-Digest"], layers, data["config"]["digest"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def cold_docker(folder: Path, nonce: str) -> Path:
    script = folder / "docker"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        # bench/family_kit.py: fresh cache-mount ids for this run; --no-cache while BENCH_NO_CACHE=1
        if [ "$1" = build ]; then
          shift
          args=("$@")
          for ((i = 0; i < ${{#args[@]}}; i++)); do
            if [ "${{args[$i]}}" = -f ]; then
              sed -i -E 's/,id=([A-Za-z0-9._-]+),/,id=\\1-bench{nonce},/g' "${{args[$((i + 1))]}}"
            fi
          done
          extra=()
          if [ "${{BENCH_NO_CACHE:-}}" = 1 ]; then extra=(--no-cache); fi
          exec {DOCKER} build "${{extra[@]}}" "${{args[@]}}"
        fi
        exec {DOCKER} "$@"
        """))  # fmt: skip
    script.chmod(0o755)
    return script


class PullEngine:
    """dockerd + docker-registry (the bench registry's storage) in a network namespace of their own."""

    def __init__(self, registry: Registry) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="torchyard-bench-pull-", dir="/var/tmp"))
        self.socket = self.folder / "docker.sock"
        config = self.folder / "registry.yml"
        config.write_text(registry.config.read_text().replace(registry.host, "127.0.0.1:5000"))
        script = f"""
            set -e
            ip link set lo up
            docker-registry serve {config} >{self.folder}/registry.log 2>&1 &
            exec dockerd --data-root {self.folder}/data --exec-root {self.folder}/exec --pidfile {self.folder}/pid \\
              -H unix://{self.socket} --bridge none --iptables=false --ip6tables=false --ip-masq=false \\
              --containerd-namespace tybench --containerd-plugins-namespace tybench-plugins \\
              >{self.folder}/dockerd.log 2>&1
        """
        self.proc = subprocess.Popen(["unshare", "--net", "--fork", "bash", "-c", script], start_new_session=True)
        for _ in range(150):
            if self.socket.exists() and self._docker("version").returncode == 0:
                return
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the throwaway dockerd did not start: {self.folder}/dockerd.log")

    def _docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, DOCKER_HOST=f"unix://{self.socket}")
        return subprocess.run([DOCKER, *args], env=env, capture_output=True, text=True, check=False, timeout=3600)

    def pull(self, repo: str, tag: str, manifest: Manifest) -> tuple[int, int]:
        """(bytes downloaded, layers found already), by the engine's own per-layer statuses."""
        import docker

        client = docker.APIClient(base_url=f"unix://{self.socket}", timeout=3600)
        status: dict[str, str] = {}
        for event in client.pull(f"127.0.0.1:5000/{repo}", tag=tag, stream=True, decode=True):
            if "error" in event:
                raise SystemExit(f"pull {repo}:{tag}: {event['error']}")
            if event.get("id") and event.get("status") in ("Already exists", "Pull complete"):
                status[event["id"]] = event["status"]
        sizes = {digest.split(":")[1][:12]: size for digest, size in manifest.layers}
        assert set(status) <= set(sizes), (status, sizes)  # an image already complete reports no layers
        fetched = [short for short, said in status.items() if said == "Pull complete"]
        return sum(sizes[short] for short in fetched), len(sizes) - len(fetched)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        subprocess.run(["umount", "-R", str(self.folder / "data")], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def host_bridge_intact() -> bool:
    """The shared engine's docker0 is still there (nothing here may touch the host's network)."""
    return subprocess.run(["ip", "link", "show", "docker0"], capture_output=True, check=False).returncode == 0


def image_size(ref: str) -> int:
    argv = [DOCKER, "image", "inspect", "-f", "{{.Size}}", ref]
    return int(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip())


def history(ref: str) -> list[tuple[int, str]]:
    """(bytes, created by) of each history entry, oldest first."""
    out = subprocess.run(
        [DOCKER, "history", "--no-trunc", "--human=false", "--format", "{{json .}}", ref],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [json.loads(line) for line in out.splitlines()]
    return [(int(r["Size"]), r["CreatedBy"]) for r in reversed(rows)]
