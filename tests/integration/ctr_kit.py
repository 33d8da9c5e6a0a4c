"""containerd's own client `ctr` (Debian's containerd package) against a containerd of the test's own: its
root, state and socket in a temporary folder, so nothing of the Docker engine's containerd is touched.
Pulls unpack: containerd checks each layer's uncompressed digest against the config's diff_ids and commits
one snapshot per layer, keyed by the layer's chain ID."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ctr:
    address: str

    def run(self, namespace: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        command = ["ctr", "--address", self.address, "--namespace", namespace, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def pull(self, namespace: str, ref: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """A cold pull (plain HTTP: the local registry) into `namespace`, unpacked with overlayfs."""
        return self.run(namespace, "images", "pull", "--plain-http", ref, timeout=timeout)

    def snapshots(self, namespace: str) -> set[str]:
        listed = self.run(namespace, "snapshots", "ls").stdout.splitlines()[1:]
        return {line.split()[0] for line in listed if line.strip()}


def chain_ids(diff_ids: list[str]) -> list[str]:
    """The OCI image spec's ChainID of each layer: the first is its diff_id, each next one
    sha256(previous chain ID + " " + diff_id)."""
    chains: list[str] = []
    for diff_id in diff_ids:
        chains.append(
            diff_id if not chains else "sha256:" + hashlib.sha256(f"{chains[-1]} {diff_id}".encode()).hexdigest()
        )
    return chains


@contextmanager
def containerd() -> Iterator[Ctr]:
    folder = Path(tempfile.mkdtemp(prefix="ty-ctd-"))  # short: a unix socket path has at most 107 characters
    socket = folder / "containerd.sock"
    config = folder / "config.toml"
    config.write_text(
        "version = 2\n"
        f'root = "{folder / "root"}"\nstate = "{folder / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n'
    )
    with (folder / "containerd.log").open("w") as log:
        process = subprocess.Popen(["containerd", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    ctr = Ctr(str(socket))
    try:
        for _ in range(100):
            if socket.exists() and ctr.run("default", "version", timeout=10).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"containerd did not start: {(folder / 'containerd.log').read_text()[-2000:]}")
        yield ctr
    finally:
        process.terminate()
        process.wait(timeout=30)
        subprocess.run(["umount", "-R", str(folder / "root")], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)
