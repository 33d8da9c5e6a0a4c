"""The image family side by side, in one run (issue 14): what sharing per-library layers saves, and the cold build.

    sudo .venv/bin/python bench/family_bench.py --markdown [--json results.json]

Images (Debian 12, Python 3.11, the PyPI default cu130 wheels): torch 2.14.1 runtime first, then 2.14.0 (the same
NVIDIA pins: cuDNN 9.24.0.43, NCCL 2.30.7, cuda-toolkit 13.0.3), then 2.13.0 (cuDNN 9.20.0.48, NCCL 2.29.7), then the
2.14.1 devel image, each built by `torchyard build` (label check, smoke suite, tags) and pushed with `docker push` to a
registry of the bench's own. It measures:

- cold build wall time: `torchyard build` of the first image (smoke suite included) next to the single-stage
  tutorial Dockerfile (bench/tutorial.Dockerfile), both from nothing (`--no-cache`, and cache mounts with ids of
  this run: bench/family_kit.py), and the first image again with `--installer pip`, cold too;
- per-stage times of those builds (torchyard's build report);
- bytes pushed per image: what the registry's storage gained; next to each image's compressed size;
- bytes a pull downloads into an engine that holds the images pulled before it (a throwaway dockerd);
- image size / (base image + the os stage's packages + the venv as `du` counts it), and devel / runtime size;
- whether `pip freeze` is the same in the uv and the pip image.

The images after the first build as a publish run builds them: the os stage and the downloads cached by the first.
Needs root (the pull engine runs in a network namespace of its own), the Docker engine (/usr/bin/docker),
docker-registry, unshare, PyPI, and about 40 GB of disk; it removes what it made.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from family_kit import DOCKER, PullEngine, Registry, cold_docker, history, host_bridge_intact, image_size

ROOT = Path(__file__).resolve().parents[1]
CA = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
FLAGS = ("--os", "debian12", "--python", "3.11", "--any-host")
BASE = "debian:bookworm-slim"
MIN_FREE = 15e9


@dataclass
class Image:
    torch: str
    flavor: str
    installer: str
    ref: str = ""
    seconds: float = 0.0  # `torchyard build` wall time (render, build, checks, smoke suite, tags)
    stages: dict[str, float] = field(default_factory=dict)
    size: int = 0  # docker image inspect
    compressed: int = 0  # the registry's layers
    pushed: int = 0  # what the registry's storage gained
    pulled: int | None = None  # what a pull downloaded after the images before it
    found: int | None = None  # layers the pull found already


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def check_disk() -> None:
    free = shutil.disk_usage("/").free
    if free < MIN_FREE:
        raise SystemExit(f"only {free / 1e9:.1f} GB free on /: the bench needs {MIN_FREE / 1e9:.0f} GB to go on")


def run(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return time.monotonic() - start


def torchyard_build(image: Image, repo: str, out: Path, docker: Path, cold: bool) -> None:
    check_disk()
    argv = [sys.executable, "-m", "builder", "build", "--torch", image.torch, *FLAGS, "--installer", image.installer,
            "--target", image.flavor, "--repo", repo, "-o", str(out), "--force"]  # fmt: skip
    env = {"TORCHYARD_DOCKER": str(docker), "BENCH_NO_CACHE": "1" if cold else "", "PIP_CERT": CA}
    log(f"torchyard build {image.torch} {image.flavor} ({image.installer}{', cold' if cold else ''})")
    image.seconds = run(argv, env)
    report = json.loads((out / "build-report.json").read_text())["targets"][image.flavor]
    image.ref, image.stages, image.size = report["ref"], report["stages"], image_size(report["ref"])


def push(image: Image, registry: Registry) -> None:
    before = registry.stored()
    run([DOCKER, "push", image.ref])
    image.pushed = registry.stored() - before
    repo, tag = image.ref.split("/", 1)[1].rsplit(":", 1)
    image.compressed = registry.manifest(repo, tag).size


def freeze(ref: str) -> list[str]:
    argv = [DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/python", ref, "-m", "pip"]
    return subprocess.run([*argv, "freeze"], capture_output=True, text=True, check=True).stdout.split()


def payload(ref: str) -> dict[str, int]:
    """The image's parts: the base image, the os stage's packages, the venv as `du -sb` counts it."""
    du = [DOCKER, "run", "--rm", "--network", "none", "--entrypoint", "du", ref, "-sb", "/opt/venv"]
    venv = int(subprocess.run(du, capture_output=True, text=True, check=True).stdout.split()[0])
    apt = sum(size for size, created in history(ref) if "apt-get install" in created and "tini" in created)
    layers = sum(size for size, created in history(ref) if created.startswith("COPY /layers/"))
    return {"base": image_size(BASE), "apt": apt, "venv": venv, "venv_layers": layers}


def tutorial(tag: str) -> tuple[float, int]:
    check_disk()
    log("tutorial Dockerfile, cold")
    seconds = run([DOCKER, "build", "--no-cache", "--secret", f"id=cacert,src={CA}", "-f",
                   str(ROOT / "bench" / "tutorial.Dockerfile"), "-t", tag, str(ROOT / "bench")],
                  {"DOCKER_BUILDKIT": "1"})  # fmt: skip
    size = image_size(tag)
    run([DOCKER, "rmi", tag])
    return seconds, size


def pulls(registry: Registry, images: list[Image]) -> None:
    log("pulls into a throwaway engine")
    engine = PullEngine(registry)
    try:
        for image in images:
            repo, tag = image.ref.split("/", 1)[1].rsplit(":", 1)
            image.pulled, image.found = engine.pull(repo, tag, registry.manifest(repo, tag))
    finally:
        engine.stop()
    if not host_bridge_intact():
        raise SystemExit("the host's docker0 is gone: recreate it (docs/benchmarks.md) and report this")


def bench(work: Path) -> dict[str, Any]:
    registry = Registry(work / "registry")
    repo = f"{registry.host}/family/torch"
    (work / "pip").mkdir()
    uv_docker, pip_docker = cold_docker(work, secrets.token_hex(4)), cold_docker(work / "pip", secrets.token_hex(4))
    first = Image("2.14.1", "runtime", "uv")
    same, other, devel = (
        Image("2.14.0", "runtime", "uv"),
        Image("2.13.0", "runtime", "uv"),
        Image("2.14.1", "devel", "uv"),
    )
    pip_first = Image("2.14.1", "runtime", "pip")
    made: list[str] = []
    try:
        tutorial_s, tutorial_size = tutorial(f"torchyard-bench-family/tutorial:{registry.port}")
        torchyard_build(first, repo, work / "first", uv_docker, cold=True)
        made.append(first.ref)
        parts, uv_freeze = payload(first.ref), freeze(first.ref)
        push(first, registry)
        torchyard_build(
            pip_first, f"torchyard-bench-family/pip{registry.port}", work / "pip-first", pip_docker, cold=True
        )
        made.append(pip_first.ref)
        same_freeze = freeze(pip_first.ref) == uv_freeze
        for image in (same, other, devel):
            torchyard_build(image, repo, work / f"{image.torch}-{image.flavor}", uv_docker, cold=False)
            made.append(image.ref)
            push(image, registry)
        pulls(registry, [first, same, other])
        return {
            "tutorial": {"seconds": tutorial_s, "size": tutorial_size},
            "images": [asdict(i) for i in (first, pip_first, same, other, devel)],
            "payload": parts,
            "base": BASE,
            "same_pip_freeze": same_freeze,
            "uv_freeze": uv_freeze,
        }
    finally:
        for ref in made:  # every tag of it (torchyard also tags the alias)
            inspect = [DOCKER, "image", "inspect", "-f", "{{.Id}}", ref]
            found = subprocess.run(inspect, capture_output=True, text=True, check=False)
            if found.returncode == 0:
                subprocess.run([DOCKER, "rmi", "-f", found.stdout.strip()], capture_output=True, check=False)
        registry.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the pull engine needs root (a dockerd in a network namespace of its own)")
    check_disk()
    work = Path(tempfile.mkdtemp(prefix="torchyard-family-bench-", dir="/var/tmp"))
    try:
        results = bench(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    from family_report import markdown

    print(markdown(results) if args.markdown else json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
