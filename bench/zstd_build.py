"""zstd written by BuildKit at build against torchyard's registry-side copy (issue 43 item 2), one run each.

    .venv/bin/python bench/zstd_build.py [--level 9] -- TORCHYARD_BUILD_FLAGS...
    e.g. .venv/bin/python bench/zstd_build.py -- --torch 2.15.0 --os debian13 --python 3.13 --arch sm_89

1. `torchyard build FLAGS --target runtime --repo 127.0.0.1:5000/zstd-bench --push` (not timed as part of the
   comparison; warm when the engine's build cache has the combination): the gzip image, in the registry.
2. The registry-side copy (builder/oci/zstd.py, what `publish --zstd` and `promote --zstd` do): the gzip layers
   read back from the registry, recompressed, uploaded beside them. Timed.
3. At build: the command `torchyard build --dry-run` prints for the runtime target, run again with buildx and
   `--output type=image,compression=zstd,compression-level=LEVEL,force-compression=true,oci-mediatypes=true`
   (every step cached by step 1: what remains is the export, i.e. the compression), then `docker push` of it,
   into an empty repository of its own so that no layer is found there already. Both timed.

Each line carries the machine's load average. The registry is scripts/services' (127.0.0.1:5000).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # builder, run from a checkout

from builder.net.http import Http, Policy  # noqa: E402
from builder.oci.client import Distribution  # noqa: E402
from builder.oci.refs import parse_ref  # noqa: E402
from builder.oci.zstd import zstd_copy  # noqa: E402

REGISTRY = "127.0.0.1:5000"
TORCHYARD = [sys.executable, "-m", "builder"]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(argv: list[str]) -> str:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"{shlex.join(argv[:4])} ... failed ({done.returncode}): {said}")
    return done.stdout


def gzip_image(flags: list[str], out: Path) -> str:
    """Step 1: build and push; the pushed runtime tag."""
    repo = f"{REGISTRY}/zstd-bench"
    text = run([*TORCHYARD, "build", *flags, "--target", "runtime", "--repo", repo, "--push", "-o", str(out)])
    for line in text.splitlines():
        if line.startswith("runtime ") and " built " in line:
            return line.split()[2]
    raise SystemExit(f"no runtime image in:\n{text[-3000:]}")


def build_argv(flags: list[str], out: Path, name: str, level: int) -> list[str]:
    """Step 3's command: the dry run's runtime build, through buildx with a zstd image output."""
    text = run([*TORCHYARD, "build", *flags, "--target", "runtime", "--dry-run", "-o", str(out)])
    line = next(x.strip() for x in text.splitlines() if x.strip().startswith("docker build "))
    argv = shlex.split(line)
    output = f"type=image,name={name},compression=zstd,compression-level={level},force-compression=true,"
    return ["docker", "buildx", "build", "--provenance=false", "--output", output + "oci-mediatypes=true", *argv[2:]]


def layer_bytes(client: Distribution, ref: str) -> int:
    image = parse_ref(ref)
    manifest = client.manifest(image.repo, image.reference)
    assert manifest is not None and not manifest.is_index, ref
    return sum(int(b["size"]) for b in manifest.blobs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=9, help="zstd level, both ways (torchyard's copy uses 9)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/zstd-bench"))
    parser.add_argument("flags", nargs="*", help="torchyard build flags choosing the combination (after --)")
    args = parser.parse_args()
    client = Distribution(Http(Policy(timeout=300)), docker_login=False)
    print(f"step 1: torchyard build {shlex.join(args.flags)} ({load()})", flush=True)
    start = time.monotonic()
    gzip = gzip_image(args.flags, args.work / "out")
    print(f"  {gzip}: {layer_bytes(client, gzip)} bytes of gzip layers, {time.monotonic() - start:.1f} s", flush=True)
    print(f"step 2: registry-side zstd copy, level {args.level} ({load()})", flush=True)
    start = time.monotonic()
    copy = zstd_copy(client, parse_ref(gzip), level=args.level)
    print(f"  {copy.summary()}: {time.monotonic() - start:.1f} s ({load()})", flush=True)
    name = f"{REGISTRY}/zstd-bench-{uuid.uuid4().hex[:8]}/rt:zstd"
    argv = build_argv(args.flags, args.work / "out", name, args.level)
    print(f"step 3: {shlex.join(argv)} ({load()})", flush=True)
    start = time.monotonic()
    run(argv)
    built = time.monotonic() - start
    start = time.monotonic()
    run(["docker", "push", "-q", name])
    pushed = time.monotonic() - start
    print(f"  zstd at build: export {built:.1f} s, docker push {pushed:.1f} s, {layer_bytes(client, name)} bytes of "
          f"zstd layers ({load()})", flush=True)  # fmt: skip
    run(["docker", "rmi", name])


if __name__ == "__main__":
    main()
