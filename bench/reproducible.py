"""Bit-identical rebuilds of a real CUDA image (issue 19, item 7): torchyard's runtime image of one combination
(default: the docker tier's e2e combination, torch 2.14.1+cu130, Python 3.11, Debian 12: torch and the NVIDIA
wheels from PyPI) built twice with --no-cache, seconds apart, each normalized as `build --push` does with
SOURCE_DATE_EPOCH (builder/oci/normalize.py), then compared: the two manifest digests, and for every layer that
differs, the Dockerfile step that made it and the files that differ in it.

--no-cache runs every step again; BuildKit's cache mounts (apt and uv downloads) are kept, as on the shared
engine of this machine (`docker builder prune --filter type=exec.cachemount` first makes the downloads cold too:
--prune-downloads; it slows everybody's next build). Needs the engine (scripts/services start) and about 30 GB.

    .venv/bin/python bench/reproducible.py [--torch 2.14.1 --variant cu130] [--prune-downloads] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from builder.oci.normalize import NormalImage, differing_layers, layer_tar, normalize_saved  # noqa: E402

DOCKER = "/usr/bin/docker"
CA = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
KEEP_TAR = 512 << 20  # larger layer tars are removed once their diff id is known (two 6 GB images: disk)
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z, as SOURCE_DATE_EPOCH would give it


def run(argv: list[str], log: Path | None = None) -> float:
    start = time.monotonic()
    done = subprocess.run(argv, env={**os.environ, "DOCKER_BUILDKIT": "1"}, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{(done.stdout + done.stderr)[-4000:]}")
    return time.monotonic() - start


def render(args: argparse.Namespace, context: Path) -> None:
    flags = ["--torch", args.torch, "--variant", args.variant, "--python", args.python, "--os", args.os]
    run([str(ROOT / ".venv/bin/torchyard"), "render", "--any-host", "--no-host-settings", *flags, "-o", str(context)])


def build(context: Path, ref: str, folder: Path) -> float:
    labels = ["--label", f"org.opencontainers.image.created={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(EPOCH))}"]
    argv = [DOCKER, "build", "--no-cache", "--progress=plain", "--target", "runtime", "--secret",
            f"id=cacert,src={CA}", *labels, "-t", ref, str(context)]  # fmt: skip
    return run(argv, folder / f"{ref.replace('/', '_').replace(':', '_')}.log")


def normal(ref: str, folder: Path) -> tuple[NormalImage, float]:
    saved = folder / f"{ref.replace('/', '_').replace(':', '_')}.tar"
    start = time.monotonic()
    run([DOCKER, "save", "-o", str(saved), ref])
    image = normalize_saved(saved, folder / f"{saved.stem}-oci", EPOCH)
    saved.unlink()
    for layer in image.layers:  # the digests are known: only the tars the comparison reads stay (disk)
        layer.blob.path.unlink()
        if layer.changed:
            layer.blob.path.with_name(layer.blob.path.name.replace(".tar.gz", ".tar")).unlink()
        if layer_tar(layer).stat().st_size > KEEP_TAR:  # a venv layer of GBs: its diff id is compared, not its files
            layer_tar(layer).unlink()
    return image, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.14.1")
    parser.add_argument("--variant", default="cu130")
    parser.add_argument("--python", default="3.11")
    parser.add_argument("--os", default="debian12")
    parser.add_argument("--prune-downloads", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="torchyard-repro-", dir="/var/tmp"))
    refs = [f"torchyard-repro/{args.torch}-{args.variant}:{side}" for side in ("a", "b")]
    try:
        context = folder / "context"
        render(args, context)
        if args.prune_downloads:
            run([DOCKER, "builder", "prune", "-f", "--filter", "type=exec.cachemount"])
        seconds = []
        images = []
        for ref in refs:
            seconds.append(build(context, ref, folder))
            image, took = normal(ref, folder)
            images.append(image)
            print(f"{ref}: built in {seconds[-1]:.0f} s, normalized in {took:.0f} s: {image.digest}  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
            time.sleep(2)  # another clock for the second build
        a, b = images
        found = differing_layers(a, b)
        same = a.digest == b.digest
        print(("the same digest" if same else "different digests") + f": {a.digest} / {b.digest}")
        print(f"{len(a.layers)} layers; {len(found)} differ; configs {'equal' if a.config == b.config else 'differ'}")
        for line in found:
            print(f"  {line}")
        if args.markdown:
            print(f"\n| build | seconds | digest |\n|---|---|---|\n| a | {seconds[0]:.0f} | `{a.digest}` |\n"
                  f"| b | {seconds[1]:.0f} | `{b.digest}` |")  # fmt: skip
    finally:
        subprocess.run([DOCKER, "rmi", *refs], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
