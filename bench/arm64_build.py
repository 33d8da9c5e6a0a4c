"""An arm64 CUDA image built on an x86_64 machine by emulation (QEMU), next to the same image for amd64.

For each platform: `torchyard build --platform P` of one combination (default torch 2.14.1 cu130, Python 3.11,
Debian 12, runtime), its build time (the docker build), the smoke suite's wall time (emulated on arm64: --small,
timeouts x10), the image size, and how many build steps BuildKit took from its cache (this script never
prunes the shared engine's cache: a step shown CACHED was not measured). The base images come from the local
multi-platform base (scripts/services) through --registry-mirror. Needs the engine and emulation set up:

    sudo scripts/services start
    python bench/arm64_build.py [--torch 2.14.1] [--variant cu130] [--target runtime] [--markdown]
                                [--platforms linux/arm64,linux/amd64]

The images are removed afterwards (--keep keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
REPO = "torchyard-bench/arm64"
MIRROR = "127.0.0.1:5000/torchyard-base"


@dataclass
class Measured:
    platform: str
    tag: str
    total: float  # the whole torchyard build command
    build: float  # the docker build, as torchyard's summary reports it
    smoke: float  # the smoke suite's own wall time (its report)
    size: int
    steps: int
    cached: int
    small: bool


def run_build(args: argparse.Namespace, platform: str, out: Path) -> Measured:
    argv = [sys.executable, "-m", "builder", "build", "--any-host", "--platform", platform, "--torch", args.torch,
            "--variant", args.variant, "--python", "3.11", "--os", "debian12", "--target", args.target,
            "--registry-mirror", MIRROR, "--repo", REPO, "-o", str(out), "--force"]  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    total = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith(f"{args.target} ") and " built " in x)
    ref, seconds = line.split()[2], line.split()[3]
    report = json.loads((out / f"smoke-{args.target}.json").read_text())
    log = (out / f"build-{args.target}.log").read_text()
    steps = set(re.findall(r"^#(\d+) \[", log, re.M))
    cached = set(re.findall(r"^#(\d+) CACHED", log, re.M))
    size = subprocess.run([DOCKER, "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True,
                          check=False)  # fmt: skip
    return Measured(platform, ref.rsplit(":", 1)[1], total, float(seconds.rstrip("s")), float(report["seconds"]),
                    int(size.stdout.strip() or 0), len(steps), len(cached & steps), bool(report["small"]))  # fmt: skip


def remove_images() -> None:
    """Every tag this script made (the immutable tag and the aliases): a CUDA image is GBs on a shared disk."""
    listed = subprocess.run([DOCKER, "images", "--format", "{{.Repository}}:{{.Tag}}", REPO], capture_output=True,
                            text=True, check=False).stdout.split()  # fmt: skip
    if listed:
        subprocess.run([DOCKER, "rmi", *listed], capture_output=True, check=False)


def markdown(args: argparse.Namespace, rows: list[Measured]) -> str:
    lines = [
        f"torch {args.torch} {args.variant}, Python 3.11, Debian 12, {args.target}; this machine: "
        f"{os.cpu_count()} CPUs, x86_64; arm64 by QEMU user emulation (binfmt, qemu-user-static)",
        "",
        "| platform | docker build | smoke suite | whole command | image size | steps from cache |",
        "|---|---|---|---|---|---|",
    ]
    for m in rows:
        smoke = f"{m.smoke:.0f} s" + (" (emulated, --small)" if m.small else "")
        lines.append(
            f"| {m.platform} | {m.build:.0f} s | {smoke} | {m.total:.0f} s | {m.size / 1e9:.2f} GB | "
            f"{m.cached} of {m.steps} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--torch", default="2.14.1")
    p.add_argument("--variant", default="cu130")
    p.add_argument("--target", default="runtime", choices=["runtime", "devel"])
    p.add_argument("--platforms", default="linux/arm64,linux/amd64")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the images")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="torchyard-arm64-bench-") as tmp:
        for platform in args.platforms.split(","):
            measured = run_build(args, platform, Path(tmp) / platform.replace("/", "-"))
            rows.append(measured)
            print(json.dumps(vars(measured)), file=sys.stderr, flush=True)
            if not args.keep:
                remove_images()
    print(markdown(args, rows) if args.markdown else json.dumps([vars(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
