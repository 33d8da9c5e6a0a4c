"""The image family side by side, in one run (issue 14): what sharing per-library layers saves, and the cold build.

    sudo .venv/bin/python bench/family_bench.py --markdown [--json results.json] [--sharing-only]

--sharing-only leaves out the tutorial's and `--installer pip`'s cold builds (bench/cold_bench.py times the cold
build against the tutorial on the shared engine): the layer sharing, sizes and pulls only.

Images (Debian 12, Python 3.11, the PyPI default cu130 wheels): torch 2.14.1 runtime first, then 2.14.0 (the same
NVIDIA pins: cuDNN 9.24.0.43, NCCL 2.30.7, cuda-toolkit 13.0.3), then 2.13.0 (cuDNN 9.20.0.48, NCCL 2.29.7), then the
2.14.1 devel image, each built by `torchyard build` (label check, smoke suite, tags) and pushed with `docker push` to a
registry of the bench's own. It measures:

- cold build wall time: `torchyard build` of the first image (smoke suite included) next to the single-stage
  tutorial Dockerfile (bench/tutorial.Dockerfile), and the first image with `--installer pip`: each from nothing,
  in a dockerd of the bench's own whose build cache it prunes before (bench/family_kit.py: BuildEngine), with
  builds on the host network;
- per-stage times of those builds (torchyard's build report);
- bytes pushed per image: what the registry's storage gained; next to each image's compressed size;
- bytes a pull downloads into an engine that holds the images pulled before it (a throwaway dockerd);
- image size / (base image + the os stage's packages + the venv as `du` counts it), and devel / runtime size;
- whether `pip freeze` is the same in the uv and the pip image.

The images after the first build from an empty build cache, as a later publish run on another machine builds them:
their os stage is built again, and its layer must be the same bytes (builder/image/os_delta.sh) for Docker's pull to
reuse the venv layers above it (each image's `os_layer` is recorded).
Needs root (two dockerd of its own: one to build, one in a network namespace of its own to pull), dockerd and the
docker CLI (/usr/bin/docker; the shared engine only lends the base image), docker-registry, unshare, PyPI, and
about 25 GB of disk (it prunes its own engine between images and stops below 12 GB free); it removes what it made.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # builder.core.stage_times, run from a checkout
from family_kit import BuildEngine, PullEngine, Registry, history, host_bridge_intact, host_network_docker, image_size

from builder.core.stage_times import StageTimes

ROOT = Path(__file__).resolve().parents[1]
CA = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
FLAGS = ("--os", "debian12", "--python", "3.11", "--any-host")
BASE = "debian:bookworm-slim"
MIN_FREE = 18e9  # a torch build holds about 12 GB (its build stage and the image's layers) until pruned
WATCH = 5e9


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
    os_layer: str = ""  # the diff id of the os stage's layer (the second): the same bytes on every rebuild?


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def check_disk(need: float = MIN_FREE) -> None:
    free = shutil.disk_usage("/").free
    if free < need:
        raise SystemExit(f"only {free / 1e9:.1f} GB free on /: the bench needs {need / 1e9:.0f} GB to go on")


def run(argv: list[str], env: dict[str, str] | None = None) -> float:
    """The command's wall time. The disk is shared: below WATCH free bytes the command is killed (and the bench
    stops, removing what it made) rather than filling it for everyone."""
    start = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)  # fmt: skip
        while proc.poll() is None:
            if shutil.disk_usage("/").free < WATCH:
                os.killpg(proc.pid, signal.SIGKILL)
                raise SystemExit(f"stopped: under {WATCH / 1e9:.0f} GB free on / while running {' '.join(argv[:6])}")
            time.sleep(2)
        if proc.returncode != 0:
            out.seek(0)
            raise SystemExit(f"failed: {' '.join(argv)}\n{out.read()[-6000:]}")
    return time.monotonic() - start


def torchyard_build(
    engine: BuildEngine, image: Image, repo: str, out: Path, docker: Path, need: float = MIN_FREE
) -> None:
    check_disk(need)
    argv = [sys.executable, "-m", "builder", "build", "--torch", image.torch, *FLAGS, "--installer", image.installer,
            "--target", image.flavor, "--repo", repo, "-o", str(out), "--force"]  # fmt: skip
    log(f"torchyard build {image.torch} {image.flavor} ({image.installer})")
    image.seconds = run(argv, {**engine.env, "TORCHYARD_DOCKER": str(docker), "PIP_CERT": CA})
    report = json.loads((out / "build-report.json").read_text())["targets"][image.flavor]
    image.ref, image.stages, image.size = report["ref"], report["stages"], image_size(engine, report["ref"])
    layers = engine.docker("image", "inspect", "-f", "{{json .RootFS.Layers}}", image.ref).stdout
    image.os_layer = json.loads(layers)[1]


def push(engine: BuildEngine, image: Image, registry: Registry) -> None:
    before = registry.stored()
    done = engine.docker("push", image.ref)
    if done.returncode != 0:
        raise SystemExit(f"push {image.ref}: {done.stderr[-2000:]}")
    image.pushed = registry.stored() - before
    repo, tag = image.ref.split("/", 1)[1].rsplit(":", 1)
    image.compressed = registry.manifest(repo, tag).size


def remove(engine: BuildEngine, image: Image) -> None:
    """Every tag of it (torchyard also tags the alias)."""
    found = engine.docker("image", "inspect", "-f", "{{.Id}}", image.ref)
    if found.returncode == 0:
        engine.docker("rmi", "-f", found.stdout.strip())


def freeze(engine: BuildEngine, ref: str) -> list[str]:
    argv = ["run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/python", ref, "-m", "pip", "freeze"]
    return engine.docker(*argv).stdout.split()


def payload(engine: BuildEngine, ref: str) -> dict[str, int]:
    """The image's parts: the base image, the os stage's packages, the venv as `du -sb` counts it."""
    du = engine.docker("run", "--rm", "--network", "none", "--entrypoint", "du", ref, "-sb", "/opt/venv").stdout
    entries = history(engine, ref)
    apt = sum(size for size, created in entries if created.startswith("COPY /tmp/torchyard-os-tree/"))  # os_delta.sh
    layers = sum(size for size, created in entries if created.startswith("COPY /layers/"))
    return {"base": image_size(engine, BASE), "apt": apt, "venv": int(du.split()[0]), "venv_layers": layers}


def tutorial(engine: BuildEngine) -> tuple[float, int]:
    check_disk()
    log("tutorial Dockerfile, cold")
    tag = "torchyard-bench-family/tutorial:cold"
    dockerfile = ROOT / "bench" / "tutorial.Dockerfile"
    argv = ["/usr/bin/docker", "build", "--network", "host", "--secret", f"id=cacert,src={CA}", "-f", str(dockerfile)]
    seconds = run([*argv, "-t", tag, str(ROOT / "bench")], engine.env)
    size = image_size(engine, tag)
    engine.docker("rmi", tag)
    return seconds, size


def pulls(registry: Registry, images: list[Image]) -> None:
    """Into an engine that holds only the images pulled before (the one before the last is removed first: the
    last pins other libraries, what it can share it shares with the first)."""
    log("pulls into a throwaway engine")
    engine = PullEngine(registry)
    try:
        for index, image in enumerate(images):
            if index == len(images) - 1 and shutil.disk_usage("/").free < MIN_FREE:
                log("not enough disk left for the last pull: left out")
                break
            repo, tag = image.ref.split("/", 1)[1].rsplit(":", 1)
            image.pulled, image.found = engine.pull(repo, tag, registry.manifest(repo, tag))
            if 0 < index < len(images) - 1:
                engine.remove(f"127.0.0.1:5000/{repo}:{tag}")
    finally:
        engine.stop()
    if not host_bridge_intact():
        raise SystemExit("the host's docker0 is gone: recreate it (docs/benchmarks.md) and report this")


def pip_build_stage(engine: BuildEngine, torch: str, out: Path) -> tuple[float, dict[str, float], list[str]]:
    """`--installer pip`, cold, as far as the manifests stage (the build stage and what it found): the installers
    differ there only, and a whole second image would not fit the disk beside the family."""
    check_disk()
    log(f"{torch} with --installer pip, cold, up to the manifests stage")
    render = [sys.executable, "-m", "builder", "render", "--torch", torch, *FLAGS, "--installer", "pip", "-o", str(out)]
    run([*render, "--force"], {"PIP_CERT": CA})
    tag = "torchyard-bench-family/pip:manifests"
    argv = ["/usr/bin/docker", "build", "--progress=plain", "--network", "host", "--secret", f"id=cacert,src={CA}",
            "--target", "manifests", "-t", tag, str(out)]  # fmt: skip
    log_file = out / "build.log"
    seconds = run(["bash", "-c", f'"$@" >{log_file} 2>&1', "build", *argv], engine.env)
    times = StageTimes()
    for line in log_file.read_text().splitlines():
        times.feed(line)
    manifest = json.loads(engine.docker("run", "--rm", "--entrypoint", "cat", tag,
                                        "/opt/torchyard/manifests/manifest-runtime.json").stdout)  # fmt: skip
    engine.docker("rmi", tag)
    return seconds, times.stages(), packages(manifest)


def packages(manifest: dict[str, Any]) -> list[str]:
    """What the build installed (`name==version` from the manifest's layers), without the installer itself:
    the uv venv gets the newest pip, the pip venv keeps the one python3-venv ships (pip freeze omits it too)."""
    found = [p for layer in manifest["layers"] for p in layer["packages"]]
    return sorted(p for p in found if not p.startswith("pip=="))


def bench(work: Path, sharing_only: bool = False) -> dict[str, Any]:
    registry = Registry(work / "registry")
    repo = f"{registry.host}/family/torch"
    docker = host_network_docker(work)
    first, devel = Image("2.14.1", "runtime", "uv"), Image("2.14.1", "devel", "uv")
    same, other = Image("2.14.0", "runtime", "uv"), Image("2.13.0", "runtime", "uv")
    images = (first, same, other, devel)
    (work / "engine").mkdir()
    engine = BuildEngine(work / "engine")
    results: dict[str, Any] = {"base": BASE, "following": "from an empty build cache"}
    try:
        engine.load(BASE)
        pip_packages: list[str] | None = None
        if not sharing_only:
            tutorial_s, tutorial_size = tutorial(engine)
            results["tutorial"] = {"seconds": tutorial_s, "size": tutorial_size}
            save(work, results)
            engine.forget()  # cold again
            pip_s, pip_stages, pip_packages = pip_build_stage(engine, first.torch, work / "pip")
            results["pip"] = {"seconds": pip_s, "stages": pip_stages}
            save(work, results)
            engine.forget()  # cold again
        torchyard_build(engine, first, repo, work / "first", docker)
        engine.forget_downloads()
        results["payload"] = payload(engine, first.ref)
        manifest = json.loads(engine.docker("run", "--rm", "--entrypoint", "cat", first.ref,
                                            "/etc/torchyard/manifest.json").stdout)  # fmt: skip
        uv_packages = packages(manifest)
        results["uv_packages"] = uv_packages
        if pip_packages is not None:
            results["pip"] |= {"same_packages": pip_packages == uv_packages,
                               "only_pip": sorted(set(pip_packages) - set(uv_packages)),
                               "only_uv": sorted(set(uv_packages) - set(pip_packages))}  # fmt: skip
        torchyard_build(engine, devel, repo, work / "first", docker, need=6e9)  # on the first's layers: sizes
        push(engine, first, registry)
        for image in (first, devel):
            remove(engine, image)
        save(work, results | {"images": [asdict(i) for i in images]})
        for image in (same, other):  # as a later publish run on another machine builds them: nothing cached
            engine.forget()
            torchyard_build(engine, image, repo, work / image.torch, docker, need=16e9)
            engine.forget_downloads()
            push(engine, image, registry)
            remove(engine, image)
            save(work, results | {"images": [asdict(i) for i in images]})
    finally:
        engine.stop()
    try:
        pulls(registry, [first, same, other])
    finally:
        registry.stop()
    return results | {"images": [asdict(i) for i in images]}


def save(work: Path, results: dict[str, Any]) -> None:
    """What is measured so far, beside the work folder: a run stopped half way keeps it."""
    (work.parent / f"{work.name}.json").write_text(json.dumps(results, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write the results here")
    parser.add_argument(
        "--sharing-only", action="store_true", help="no tutorial and no --installer pip build (bench/cold_bench.py)"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the pull engine needs root (a dockerd in a network namespace of its own)")
    check_disk()
    work = Path(tempfile.mkdtemp(prefix="torchyard-family-bench-", dir="/var/tmp"))
    try:
        results = bench(work, args.sharing_only)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    from family_report import markdown

    print(markdown(results) if args.markdown else json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
