"""What a one-file change costs in a project (issue 40): the seconds of `torchyard build` and the bytes of the
layers it makes anew, over an image already built.

    python bench/project_rebuild.py [--project examples/project] [--file src/tinyproj/__init__.py] [--runs 3]

Copies the project to a temporary folder, builds it once (`torchyard build`, the base from cache or built),
then, per run, appends a comment line to FILE and builds again, timing the command and comparing the two project
images' layers (`docker image inspect`: RootFS) and sizes (`docker history`). Prints a markdown snippet; records
nothing by itself. Removes the project images it tagged (not the base's)."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def torchyard(folder: Path, *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "builder", *args], cwd=folder, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-3000:]
        raise SystemExit(f"torchyard {' '.join(args)} failed ({done.returncode}):\n{tail}")
    return time.perf_counter() - start, done.stdout


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def project_ref(out: str) -> str:
    return next(line.split()[2] for line in out.splitlines() if line.startswith("project "))


def layers(ref: str) -> list[str]:
    return list(json.loads(docker("image", "inspect", ref))[0]["RootFS"]["Layers"])


def new_bytes(ref: str, count: int) -> int:
    rows = docker("history", "--no-trunc", "--human=false", "--format", "{{.Size}}", ref).split()
    return sum([size for size in map(int, rows) if size > 0][:count])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=ROOT / "examples" / "project")
    parser.add_argument("--file", default="src/tinyproj/__init__.py")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    made: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "project"
        shutil.copytree(args.project, folder, ignore=shutil.ignore_patterns("build", "__pycache__"))
        first, out = torchyard(folder, "build")
        made.append(project_ref(out))
        seconds, sizes, changed = [], [], []
        try:
            for run in range(args.runs):
                path = folder / args.file
                path.write_text(path.read_text() + f"# rebuild {run}\n")
                took, out = torchyard(folder, "build")
                before, after = layers(made[-1]), layers(project_ref(out))
                made.append(project_ref(out))
                differ = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
                seconds.append(took)
                changed.append(len(differ))
                sizes.append(new_bytes(made[-1], len(after) - differ[0]) if differ else 0)
        finally:
            for ref in made:
                subprocess.run(["docker", "rmi", ref], capture_output=True, check=False)
    print(f"first `torchyard build` (base from cache or built, then the project): {first:.1f} s")
    print(f"one-file rebuild, median of {args.runs}: {statistics.median(seconds):.1f} s, "
          f"{statistics.median(changed):.0f} layer(s) changed, {statistics.median(sizes):.0f} bytes from the first "
          "changed layer up")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
