"""A second Docker engine for the docker tier: a dockerd of the test's own beside the shared one, with the
containerd image store as the shared engine has it (scripts/services), and everything of its own: data root, exec
root (its containerd's state), pid file, socket, containerd namespaces and bridge. Stopped and removed whole by
close(), also after a failed start."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DOCKER = "/usr/bin/docker"
# Not test_engine_faults.py's bridge or subnet: both modules may hold an engine at once.
BRIDGE, BRIDGE_CIDR = "tytwo0", "10.254.252.1/24"


@dataclass
class SecondEngine:
    folder: Path  # short: a unix socket's path is limited to 107 bytes
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.folder}/d.sock"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def argv(self) -> list[str]:
        """No iptables and a bridge of its own: `--bridge none` would delete the host's docker0 (the shared engine's
        containers' network). BuildKit's RUN steps use the host's network, as on the shared engine."""
        config = self.folder / "daemon.json"
        config.write_text(json.dumps({"features": {"containerd-snapshotter": True}}))
        return [
            "dockerd", "--config-file", str(config), "--data-root", f"{self.folder}/root",
            "--exec-root", f"{self.folder}/exec", "--pidfile", f"{self.folder}/pid", "--host", self.host,
            "--containerd-namespace", "torchyard-two", "--containerd-plugins-namespace", "torchyard-two-plugins",
            "--bridge", BRIDGE, "--iptables=false", "--ip6tables=false", "--ip-masq=false",
        ]  # fmt: skip

    def start(self) -> None:
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
            subprocess.run(["ip", "addr", "add", BRIDGE_CIDR, "dev", BRIDGE], check=True)
        with (self.folder / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=log)
        for _ in range(240):
            if self.docker("info").returncode == 0:
                return
            time.sleep(0.25)
        raise AssertionError(f"the second dockerd did not start: {(self.folder / 'dockerd.log').read_text()[-800:]}")

    def image_store(self) -> str:
        """`docker info`'s driver-type row: io.containerd.snapshotter.v1 on the containerd image store."""
        return self.docker("info", "--format", "{{json .DriverStatus}}").stdout.strip()

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([DOCKER, *args], env=self.env(), capture_output=True, text=True, check=False)

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL), end what it left running, unmount and delete its folder and bridge."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        _kill_processes_under(str(self.folder))
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(f"{self.folder}/")), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True, check=False)


def _kill_processes_under(path: str) -> None:
    """The processes the engine started whose command line names its folder (its containerd, shims), by pid."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(path.encode() in arg for arg in argv):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
