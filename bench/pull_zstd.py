"""Pulls and pushes of large images (issue 21, items 4 and 5), against the local registry (scripts/services).

`pull`: the zstd copy of a gzip image already in the registry (builder/oci/zstd.py, written registry-side,
timed), then cold pulls of both through containerd's own client `ctr` (Debian's containerd package), each
into a containerd of its own started for that pull (empty content store, empty snapshots: nothing cached),
unpacked with overlayfs as a runtime would: seconds, and the bytes the manifest makes a client download.

    # the gzip image: e.g. a torchyard runtime image of the docker tier's e2e combination
    docker tag IMAGE 127.0.0.1:5000/pull-bench/rt:gzip && docker push 127.0.0.1:5000/pull-bench/rt:gzip
    python bench/pull_zstd.py pull --image 127.0.0.1:5000/pull-bench/rt:gzip [--runs 1] [--level 9]

`resume`: a blob of --size-gb of noise pushed chunked (builder/oci/upload.py) through the test proxy
(tests/integration/drop_proxy.py) three times: uncut; cut between two chunks at 90 %; cut in the middle of a
chunk at 90 %. Seconds, the bytes the proxy let through toward the registry, and what the client did.

    python bench/pull_zstd.py resume [--size-gb 2] [--chunk-mb 16]

The machine's load average is printed with each result (other work shares the CPUs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # builder, run from a checkout
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # drop_proxy: the proxy the docker tier uses

from builder.net.http import Http, Policy  # noqa: E402
from builder.oci.client import Distribution  # noqa: E402
from builder.oci.refs import RepoRef, parse_ref  # noqa: E402
from builder.oci.upload import UploadPolicy  # noqa: E402
from builder.oci.zstd import LEVEL, zstd_copy, zstd_tag  # noqa: E402

REGISTRY = "127.0.0.1:5000"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextmanager
def containerd() -> Iterator[str]:
    """A containerd of its own (root, state, socket in a fresh folder); yields the socket's path."""
    folder = Path(tempfile.mkdtemp(prefix="ty-bench-ctd-"))
    socket = folder / "containerd.sock"
    config = folder / "config.toml"
    config.write_text(
        f'version = 2\nroot = "{folder / "root"}"\nstate = "{folder / "state"}"\n'
        f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{socket}"\n'
    )
    with (folder / "log").open("w") as log:
        process = subprocess.Popen(["containerd", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            if (
                socket.exists()
                and subprocess.run(["ctr", "-a", str(socket), "version"], capture_output=True, check=False).returncode
                == 0
            ):
                break
            time.sleep(0.1)
        yield str(socket)
    finally:
        process.terminate()
        process.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def cold_pull(ref: str) -> float:
    with containerd() as socket:
        start = time.monotonic()
        done = subprocess.run(
            ["ctr", "-a", socket, "-n", "bench", "images", "pull", "--plain-http", ref],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"ctr pull {ref} failed: {done.stderr[-2000:]}")
    return seconds


def download_bytes(client: Distribution, ref: str) -> int:
    image = parse_ref(ref)
    manifest = client.manifest(image.repo, image.reference)
    assert manifest is not None and not manifest.is_index, f"{ref}: a single-platform image is measured"
    return len(manifest.raw) + sum(int(b["size"]) for b in manifest.blobs())


def pull(args: argparse.Namespace) -> None:
    client = Distribution(Http(Policy(timeout=300)), docker_login=False)
    source = parse_ref(args.image)
    print(f"zstd copy of {args.image} at level {args.level} ({load()})", flush=True)
    start = time.monotonic()
    copy = zstd_copy(client, source, level=args.level)
    print(f"  {copy.summary()}: {time.monotonic() - start:.1f} s ({load()})", flush=True)
    target = f"{source.repo}:{zstd_tag(str(source.tag))}"
    for ref in (args.image, target) * args.runs:
        seconds = cold_pull(ref)
        print(f"cold pull {ref}: {download_bytes(client, ref)} bytes, {seconds:.1f} s ({load()})", flush=True)


def noise_file(folder: Path, size: int) -> tuple[Path, str]:
    path, digest = folder / "blob", hashlib.sha256()
    with path.open("wb") as out:
        for _ in range(size // (16 << 20)):
            block = os.urandom(16 << 20)
            digest.update(block)
            out.write(block)
    return path, "sha256:" + digest.hexdigest()


def resume(args: argparse.Namespace) -> None:
    from drop_proxy import drop_proxy

    size, chunk = int(args.size_gb * (1 << 30)) // (16 << 20) * (16 << 20), args.chunk_mb << 20
    with tempfile.TemporaryDirectory(prefix="ty-bench-blob-") as folder:
        path, digest = noise_file(Path(folder), size)
        ninety = int(size * 0.9)
        cases = {
            "uncut": {},
            "cut between chunks at 90 %": {"cut_patches": (ninety // chunk + 1,)},
            "cut mid-chunk at 90 %": {"drops_at": (ninety + chunk // 2,)},
        }
        for name, cut in cases.items():
            with drop_proxy(REGISTRY, **cut) as proxy, path.open("rb") as data:
                client = Distribution(Http(Policy(timeout=300)), docker_login=False, uploads=UploadPolicy(chunk=chunk))
                repo = RepoRef(proxy.address, f"pull-bench-{uuid.uuid4().hex[:8]}/blob")
                start = time.monotonic()
                sent = client.upload_file(repo, data, digest, size)
                seconds = time.monotonic() - start
            print(
                f"{name}: {size} bytes blob, {proxy.sent} bytes through the proxy ({proxy.sent / size:.3f} x), "
                f"{seconds:.1f} s; resumed {sent.resumed}, restarted {sent.restarted} ({load()})",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pull")
    p.add_argument("--image", required=True, help="a single-platform gzip image in the local registry (repo:tag)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--level", type=int, default=LEVEL)
    r = sub.add_parser("resume")
    r.add_argument("--size-gb", type=float, default=2.0)
    r.add_argument("--chunk-mb", type=int, default=16)
    args = parser.parse_args()
    pull(args) if args.command == "pull" else resume(args)


if __name__ == "__main__":
    main()
