"""What the run-time compilers cost: the `os` stage (the base every runtime image is built on) with and without
the packages torch.compile needs at run time (g++, and python3-dev on the OS's own Python; issue 11).

Renders a combination with `torchyard render`, builds its `os` stage twice (as rendered, and with those
packages taken out of its apt-get install), and reports both image sizes and the difference, which is what
every runtime image of that OS pays. Needs a Docker engine (scripts/services start).

    python bench/compiler_size.py [--torch 2.14.1] [--os debian12] [--python 3.11]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
REPO = "torchyard-bench/compilers"
PACKAGES = ("g++", "python3-dev")


def run(argv: list[str]) -> str:
    done = subprocess.run(argv, env=dict(os.environ, DOCKER_BUILDKIT="1"), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench: `{shlex.join(argv)}` failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def without_compilers(dockerfile: str) -> str:
    """The same Dockerfile, its os-files stage's apt-get install without the compiler packages."""
    head, os_stage = dockerfile.split(" AS os-files\n", 1)
    os_stage, rest = os_stage.split("\nFROM ", 1)
    for package in PACKAGES:
        os_stage = re.sub(rf"\n      {re.escape(package)} \\", "", os_stage)
    return f"{head} AS os-files\n{os_stage}\nFROM {rest}"


def build(context: Path, dockerfile: Path, tag: str) -> float:
    start = time.monotonic()
    run([DOCKER, "build", "--progress=plain", "--target", "os", "-f", str(dockerfile), "-t", tag, str(context)])
    return time.monotonic() - start


def size(tag: str) -> int:
    return int(run([DOCKER, "image", "inspect", "-f", "{{.Size}}", tag]).strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch", default="2.14.1")
    parser.add_argument("--os", dest="os_name", default="debian12")
    parser.add_argument("--python", default="3.11")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torchyard-bench-") as tmp:
        context = Path(tmp)
        flags = ["--torch", args.torch, "--os", args.os_name, "--python", args.python, "--no-host-settings"]
        run([sys.executable, "-m", "builder", "render", *flags, "-o", str(context)])
        rendered = (context / "Dockerfile").read_text()
        if not all(f"      {p} \\" in rendered for p in PACKAGES[:1]):
            sys.exit("bench: the rendered os stage installs no compiler (torch < 2.0?)")
        (context / "Dockerfile.bare").write_text(without_compilers(rendered))
        tags = {"with": f"{REPO}:with", "without": f"{REPO}:without"}
        seconds = {
            "with": build(context, context / "Dockerfile", tags["with"]),
            "without": build(context, context / "Dockerfile.bare", tags["without"]),
        }
        sizes = {name: size(tag) for name, tag in tags.items()}
        run([DOCKER, "rmi", *tags.values()])
    extra = sizes["with"] - sizes["without"]
    print(f"`python bench/compiler_size.py {shlex.join(sys.argv[1:] if argv is None else argv)}`\n")
    print(
        f"torch {args.torch}, {args.os_name}, Python {args.python}: the `os` stage, from which runtime images start\n"
    )
    print("| os stage | size (MB) | build (s) |\n|---|---|---|")
    print(f"| without {' / '.join(PACKAGES)} | {sizes['without'] / 1e6:.0f} | {seconds['without']:.0f} |")
    print(f"| with them (as rendered) | {sizes['with'] / 1e6:.0f} | {seconds['with']:.0f} |")
    print(f"\nThe compilers cost {extra / 1e6:.0f} MB per runtime image ({extra / 2**20:.0f} MiB).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
