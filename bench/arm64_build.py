"""An arm64 CUDA image built on an x86_64 machine by emulation (QEMU), next to the same image for amd64.

For each platform: the `docker build` that `torchyard render --platform P` prints for one combination (default
torch 2.14.1 cu130, Python 3.11, Debian 12, runtime), timed; the image size; how many build steps BuildKit took
from its cache (this script never prunes the shared engine's cache: a step shown CACHED was not measured); then
`torchyard smoke --platform P` on it (emulated on arm64: --small, timeouts x10), its wall time and result. The
build and the smoke suite are run apart (not `torchyard build`) so that an image whose smoke suite fails is
still measured. The base images come from the local
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
import shlex
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
    build: float  # the docker build torchyard render prints, timed here
    size: int
    steps: int
    cached: int  # build steps BuildKit took from its cache (not measured)
    smoke: float  # torchyard smoke --platform P (emulated on arm64 here: --small, timeouts x10)
    smoke_result: str  # "passed", or the first failure


def run_build(args: argparse.Namespace, platform: str, out: Path) -> Measured:
    argv = [sys.executable, "-m", "builder", "render", "--any-host", "--platform", platform, "--torch", args.torch,
            "--variant", args.variant, "--python", "3.11", "--os", "debian12", "--target", args.target,
            "--registry-mirror", MIRROR, "--repo", REPO, "-o", str(out), "--force"]  # fmt: skip
    rendered = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if rendered.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{rendered.stderr[-3000:]}")
    line = next(x for x in rendered.stdout.splitlines() if x.startswith("DOCKER_BUILDKIT=1 "))
    build = shlex.split(line)[1:]
    build[0] = DOCKER
    tag = build[build.index("-t") + 1]
    start = time.monotonic()
    done = subprocess.run(build, env=dict(os.environ, DOCKER_BUILDKIT="1"), capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(build)}\n{done.stderr[-3000:]}")
    steps = set(re.findall(r"^#(\d+) \[", done.stderr, re.M))
    cached = set(re.findall(r"^#(\d+) CACHED", done.stderr, re.M)) & steps
    size = subprocess.run([DOCKER, "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True,
                          check=False)  # fmt: skip
    smoke_seconds, result = run_smoke(tag, platform, out / "smoke.json")
    return Measured(platform, tag.rsplit(":", 1)[1], seconds, int(size.stdout.strip() or 0), len(steps), len(cached),
                    smoke_seconds, result)  # fmt: skip


def run_smoke(tag: str, platform: str, report: Path) -> tuple[float, str]:
    argv = [sys.executable, "-m", "builder", "smoke", tag, "--platform", platform, "--report", str(report)]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    if done.returncode == 0:
        return seconds, "passed"
    if report.exists():
        failed = [c for c in json.loads(report.read_text())["checks"] if c["status"] == "failed"]
        return seconds, f"{len(failed)} failed, first: {failed[0]['name']}: {failed[0]['message']}" if failed else "?"
    return seconds, (done.stderr.strip().splitlines() or ["no report"])[-1][:200]


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
        "| platform | docker build | image size | steps from cache | smoke suite | smoke result |",
        "|---|---|---|---|---|---|",
    ]
    for m in rows:
        lines.append(
            f"| {m.platform} | {m.build:.0f} s | {m.size / 1e9:.2f} GB | {m.cached} of {m.steps} | {m.smoke:.0f} s "
            f"| {m.smoke_result[:160]} |"
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
