"""The notebook image against runtime (issue 41, item 4; goal notebook / runtime <= 1.10).

Finds the two images of one combination by their labels (io.torchyard.combination, io.torchyard.flavor; the
newest of each when several are there), or takes them as --runtime / --notebook, and reports the engine's size of
each (`docker image inspect`'s Size: with the containerd image store, the compressed size of the image's layers),
their layer counts, the layers the notebook adds (`docker history`: uncompressed, as the engine unpacked them) and
the ratio. Build both first, e.g. (the docker tier's e2e combination; the second build reuses the first's cache):

    torchyard build --torch 2.15.0 --os debian13 --python 3.13 --arch sm_89 --extension examples/addone \\
        --target runtime -o /tmp/nb-bench/runtime          # then the same with --target notebook
    python bench/notebook_size.py [--combination torch2.15.0-cu132-py3.13-debian13] [--goal 1.10]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
E2E = "torch2.15.0-cu132-py3.13-debian13"


def docker(*args: str) -> str:
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench: `docker {shlex.join(args)}` failed: {done.stderr.strip()[-800:]}")
    return done.stdout


def newest(combination: str, flavor: str) -> str:
    """The newest local image of the combination and flavor, by its labels."""
    filters = (
        "--filter",
        f"label=io.torchyard.combination={combination}",
        "--filter",
        f"label=io.torchyard.flavor={flavor}",
    )
    listed = docker("images", *filters, "--format", "{{.ID}} {{.CreatedAt}} {{.Repository}}:{{.Tag}}").splitlines()
    found = [line for line in listed if "<none>" not in line]  # an untagged image: a build still under way
    if not found:
        sys.exit(f"bench: no local {flavor} image of {combination}: build it first (this module's docstring)")
    return sorted(found, key=lambda line: line.split(" ", 1)[1])[-1].rsplit(" ", 1)[1]


def inspect(ref: str) -> tuple[int, int, str]:
    """(size in bytes, layer count, image id)."""
    (data,) = json.loads(docker("image", "inspect", ref))
    return int(data["Size"]), len(data["RootFS"]["Layers"]), str(data["Id"])


def stage_layers(image: str) -> list[tuple[str, str]]:
    """(size, instruction) of the layers of the image's final stage, newest first: docker history down to the
    venv stage's last step (the security refresh, OS_REFRESH), which runtime and notebook share."""
    found = []
    for row in docker("history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", image).splitlines():
        size, what = row.split("\t", 1)
        if "OS_REFRESH" in what:
            break
        if size != "0B":
            found.append((size, " ".join(what.split())[:110]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--combination", default=E2E)
    parser.add_argument("--runtime", help="the runtime image (default: found by its labels)")
    parser.add_argument("--notebook", help="the notebook image (default: found by its labels)")
    parser.add_argument("--goal", type=float, default=1.10)
    args = parser.parse_args()
    runtime = args.runtime or newest(args.combination, "runtime")
    notebook = args.notebook or newest(args.combination, "notebook")
    (r_size, r_layers, _), (n_size, n_layers, _) = inspect(runtime), inspect(notebook)
    ratio = n_size / r_size
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    print("| image | size (bytes) | layers |\n|---|---|---|")
    print(f"| runtime `{runtime}` | {r_size:,} | {r_layers} |")
    print(f"| notebook `{notebook}` | {n_size:,} | {n_layers} |")
    verdict = "met" if ratio <= args.goal else "NOT met"
    added = f"+{(n_size - r_size) / 1e6:.0f} MB"
    print(f"| notebook / runtime | **{ratio:.3f}** (goal <= {args.goal:.2f}: {verdict}) | {added} |")
    for name, ref in (("runtime", runtime), ("notebook", notebook)):
        print(f"\nthe {name} stage's layers on the shared venv (uncompressed, newest first):")
        for size, what in stage_layers(ref):
            print(f"  {size:>8}  {what}")
    sys.exit(0 if ratio <= args.goal else 1)


if __name__ == "__main__":
    main()
