"""What bench/family_bench.py measures with: a registry whose storage it can count, a docker CLI that builds with
fresh caches, and an engine that has never seen the images, for pulls.

- `Registry`: docker-registry on a free port over a fresh folder. Bytes pushed = what the folder gained.
- `BuildEngine`: a dockerd of the bench's own (data root, bridge, no iptables), so cold means cold (its cache is
  pruned before each cold build) and nothing of the shared engine's caches, which other people's builds use, is
  pruned or filled; `host_network_docker()` is the docker CLI torchyard drives it with.
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


def host_network_docker(folder: Path) -> Path:
    """A docker CLI for torchyard (TORCHYARD_DOCKER): its builds run on the host network (the build engine has
    no bridge with NAT: bench/family_kit.py's BuildEngine)."""
    script = folder / "docker"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        if [ "$1" = build ]; then shift; exec {DOCKER} build --network host "$@"; fi
        exec {DOCKER} "$@"
        """))  # fmt: skip
    script.chmod(0o755)
    return script


class BuildEngine:
    """A dockerd of the bench's own, in the host's network namespace: cold builds without touching the shared
    engine's caches, and a build cache the bench may prune. Its bridge is one the bench makes (with `--bridge none`
    dockerd would delete the host's docker0); no iptables, no NAT: builds use the host network, the smoke suite
    none."""

    BRIDGE = "tybench0"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "docker.sock"
        subprocess.run(["ip", "link", "add", self.BRIDGE, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", "10.254.254.1/24", "dev", self.BRIDGE], check=True)
        argv = ["dockerd", "--data-root", f"{folder}/data", "--exec-root", f"{folder}/exec", "--pidfile",
                f"{folder}/pid", "-H", f"unix://{self.socket}", "--bridge", self.BRIDGE, "--iptables=false",
                "--ip6tables=false", "--ip-masq=false", "--ip-forward=false", "--cgroup-parent", "tybench",
                "--containerd-namespace", "tybuild", "--containerd-plugins-namespace", "tybuild-plugins"]  # fmt: skip
        with (folder / "dockerd.log").open("w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(150):
            if self.socket.exists() and self.docker("version").returncode == 0:
                return
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"the bench's dockerd did not start: {folder}/dockerd.log")

    @property
    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": f"unix://{self.socket}", "DOCKER_BUILDKIT": "1"}

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([DOCKER, *args], env={**os.environ, **self.env}, capture_output=True, text=True,
                              check=False, timeout=3600)  # fmt: skip

    def load(self, ref: str) -> None:
        """An image of the shared engine (the base image: no registry can be reached here)."""
        save = subprocess.Popen([DOCKER, "save", ref], stdout=subprocess.PIPE)
        subprocess.run([DOCKER, "load"], stdin=save.stdout, env={**os.environ, **self.env}, check=True,
                       capture_output=True)  # fmt: skip
        save.wait()

    def forget(self, keep_stage: tuple[Path, str] | None = None) -> bool:
        """Prune its build cache: all of it, or all but one stage of a Dockerfile (`keep_stage`: the context and
        the stage, built again first so its records are the recently used ones). True when the stage stayed
        cached through the prune (the next build reuses it, as a publish run reuses its os stage)."""
        if keep_stage is None:
            self.docker("builder", "prune", "-af")
            return False
        context, stage = keep_stage
        self._stage(context, stage)  # its records: used just now
        self.docker("builder", "prune", "-af", "--filter", "until=20s")  # what was not used in the last 20 s
        return "CACHED" in self._stage(context, stage)

    def forget_downloads(self) -> None:
        """The cache mounts (uv keeps the unpacked wheels: GBs): the disk is shared, later builds download again."""
        self.docker("builder", "prune", "-f", "--filter", "type=exec.cachemount")

    def _stage(self, context: Path, stage: str) -> str:
        done = self.docker("build", "--progress=plain", "--network", "host", "--target", stage, str(context))
        return done.stdout + done.stderr

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        subprocess.run(["umount", "-R", str(self.folder / "data")], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.BRIDGE], capture_output=True, check=False)
        shutil.rmtree(self.folder / "data", ignore_errors=True)


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

    def remove(self, ref: str) -> None:
        self._docker("rmi", ref)

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


def image_size(engine: BuildEngine, ref: str) -> int:
    return int(engine.docker("image", "inspect", "-f", "{{.Size}}", ref).stdout.strip())


def history(engine: BuildEngine, ref: str) -> list[tuple[int, str]]:
    """(bytes, created by) of each history entry, oldest first."""
    out = engine.docker("history", "--no-trunc", "--human=false", "--format", "{{json .}}", ref).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return [(int(r["Size"]), r["CreatedBy"]) for r in reversed(rows)]
