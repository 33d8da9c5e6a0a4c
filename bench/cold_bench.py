"""Cold build of the CUDA runtime image on the shared engine, next to the one-stage tutorial Dockerfile, without
pruning anyone's cache.

`torchyard render` writes the Dockerfile; this script gives every BuildKit cache mount of it (apt, pip, uv) an id
of this run's own and builds with `--no-cache`, so nothing comes from a cache: every download and every step runs,
and no other session's build of the same combination can be merged into this one. The tutorial Dockerfile
(bench/tutorial.Dockerfile) has no cache mounts; `--no-cache` is enough there. Both use the base image the engine
already holds. Prints the wall time of each build, the Dockerfile stages' times (BuildKit's own step times,
builder/core/stage_times.py), the smoke suite's wall time (`torchyard smoke`, no GPU) and `uptime` before and
after each: the machine is shared, so the numbers are upper bounds under the load shown.

    python bench/cold_bench.py [--torch 2.14.1] [--skip-tutorial] [--skip-smoke] [--keep] [--in-place MANIFEST]
                               [--save-manifest PATH] [--rewrite-timestamp]

--save-manifest PATH copies the built image's /etc/torchyard/manifest.json out, for a following --in-place run.

--in-place MANIFEST builds the experiment of bench/inplace_variant.py instead of the rendered venv stage.

--rewrite-timestamp builds with buildx, `SOURCE_DATE_EPOCH=0` and the exporter's `rewrite-timestamp=true` into an
OCI archive, then `docker load`s it (Docker 26's own image exporter refuses the option: bench/inplace_digests.py);
the build's and the load's seconds are printed apart. With --in-place it is the way the in-place layers stay
content-only on BuildKit 0.13.

Afterwards it removes its images and prunes the build-cache records that appeared during its run and are not in
use (`docker builder prune --filter id=...`, one record at a time): on a shared engine that can include another
session's records of the same minutes (cache only: their next build redoes those steps). `--keep` prunes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from builder.core.stage_times import StageTimes, describe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inplace_variant import rewrite

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
CA = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
_CACHE_ID = re.compile(r"(type=cache,id=)([^,\s]+)")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def own_cache_ids(dockerfile: str, nonce: str) -> str:
    """Every cache mount id with `-<nonce>` appended: a cold download cache, shared with no other build."""
    return _CACHE_ID.sub(lambda m: f"{m[1]}{m[2]}-{nonce}", dockerfile)


def render(torch: str, out: Path, root: Path) -> None:
    argv = [sys.executable, "-m", "builder", "render", "--torch", torch, "--os", "debian12", "--python", "3.11"]
    argv += ["--target", "runtime", "--platform", "linux/amd64", "--force", "-o", str(out)]
    subprocess.run(argv, check=True, capture_output=True, text=True, cwd=root)


def build(
    dockerfile: Path, context: Path, tag: str, log: Path, archive: Path | None = None
) -> tuple[float, dict[str, float]]:
    """`archive`: build with rewrite-timestamp into this OCI archive instead of the engine's store."""
    argv = [DOCKER, "build", "--no-cache", "--progress=plain", "--target", "runtime", "-f", str(dockerfile)]
    if archive is not None:
        output = f"type=oci,dest={archive},name={tag},rewrite-timestamp=true"
        argv[1:2] = ["buildx", "build", "--provenance=false", "--build-arg", "SOURCE_DATE_EPOCH=0", "--output", output]
    if "AS runtime" not in dockerfile.read_text(encoding="utf-8"):
        argv.remove("--target")
        argv.remove("runtime")
    argv += ["--secret", f"id=cacert,src={CA}", *(["-t", tag] if archive is None else []), str(context)]
    times = StageTimes()
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            argv, env=dict(os.environ, DOCKER_BUILDKIT="1"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            sink.write(line)
            times.feed(line.rstrip("\n"))
        code = proc.wait()
    wall = time.monotonic() - start
    if code != 0:
        sys.exit(f"build of {tag} failed ({code}); log: {log}")
    return wall, times.stages()


def load_archive(archive: Path) -> float:
    start = time.monotonic()
    subprocess.run([DOCKER, "load", "-i", str(archive)], capture_output=True, check=True)
    seconds = time.monotonic() - start
    archive.unlink()
    return seconds


def smoke(tag: str) -> float:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "builder", "smoke", tag], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        sys.exit(f"smoke suite of {tag} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.monotonic() - start


def save_manifest(tag: str, path: Path) -> None:
    out = subprocess.run(
        [DOCKER, "run", "--rm", "--entrypoint", "cat", tag, "/etc/torchyard/manifest.json"],
        capture_output=True,
        check=True,
        text=True,
    )
    path.write_text(out.stdout, encoding="utf-8")


def cache_records() -> set[str]:
    out = subprocess.run([DOCKER, "system", "df", "-v"], capture_output=True, text=True, check=True).stdout
    part = out.split("Build cache usage", 1)[-1].splitlines()[3:]
    return {line.split()[0].rstrip("*") for line in part if line.strip()}


def clean(tags: list[str], before: set[str]) -> None:
    subprocess.run([DOCKER, "rmi", *tags], capture_output=True, check=False)
    left = cache_records() - before
    while left:  # a record is pruned only once the records built on it are gone: passes until none goes
        for record in sorted(left):
            prune = [DOCKER, "builder", "prune", "-f", "--filter", f"id={record}"]
            subprocess.run(prune, capture_output=True, check=False)
        now = cache_records() - before
        if now == left:
            break
        left = now


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.14.1")
    parser.add_argument("--skip-tutorial", action="store_true")
    parser.add_argument("--skip-smoke", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the images and cache records")
    parser.add_argument("--work", type=Path, default=None, help="folder for the context and logs")
    parser.add_argument("--in-place", type=Path, default=None, metavar="MANIFEST", help="bench/inplace_variant.py")
    parser.add_argument(
        "--save-manifest", type=Path, default=None, metavar="PATH", help="copy the image's manifest here (--in-place)"
    )
    parser.add_argument("--rewrite-timestamp", action="store_true", help="through an OCI archive, then docker load")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the torchyard checkout that renders (default: this one)"
    )
    return parser.parse_args()


def main() -> None:
    args = arguments()
    work = args.work or Path(tempfile.mkdtemp(prefix="cold-bench-"))
    nonce = secrets.token_hex(4)
    before = cache_records()
    result: dict[str, object] = {"nonce": nonce}
    tags: list[str] = []
    try:
        if not args.skip_tutorial:
            tag = f"torchyard-cold/tutorial:{nonce}"
            tags.append(tag)
            empty = work / "tutorial-context"
            empty.mkdir(parents=True, exist_ok=True)
            result["tutorial_load_before"] = uptime()
            wall, _ = build(ROOT / "bench" / "tutorial.Dockerfile", empty, tag, work / "tutorial.log")
            result.update(tutorial_s=round(wall, 1), tutorial_load_after=uptime())
            if not args.keep:  # its ~6 GB go before torchyard's build needs the disk
                clean([tag], before)
                tags.remove(tag)
        context = work / "context"
        render(args.torch, context, args.root)
        dockerfile = context / "Dockerfile"
        if args.in_place:
            rewrite(context, args.in_place)
        dockerfile.write_text(own_cache_ids(dockerfile.read_text(encoding="utf-8"), nonce), encoding="utf-8")
        tag = f"torchyard-cold/runtime:{nonce}"
        tags.append(tag)
        result["torchyard_load_before"] = uptime()
        archive = work / "image.tar" if args.rewrite_timestamp else None
        wall, stages = build(dockerfile, context, tag, work / "torchyard.log", archive)
        result.update(torchyard_build_s=round(wall, 1), stages=stages, torchyard_load_after=uptime())
        print(f"torchyard build {wall:.1f} s: {describe(stages)}", flush=True)
        if archive is not None:
            result.update(docker_load_s=round(load_archive(archive), 1), docker_load_after=uptime())
        if args.save_manifest:
            save_manifest(tag, args.save_manifest)
        if not args.skip_smoke:
            result["smoke_s"] = round(smoke(tag), 1)
            result["smoke_load_after"] = uptime()
    finally:
        if not args.keep:
            clean(tags, before)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
