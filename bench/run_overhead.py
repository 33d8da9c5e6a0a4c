"""What `torchyard run` adds to a plain `docker run` of the same image (issue 23; goal < 0.5 s).

    python bench/run_overhead.py [--image debian:bookworm-slim] [--runs 15] [--docker /usr/bin/docker]

Runs, interleaved and after one warm-up each: `docker run --rm --network none IMAGE true`; the exact line
`torchyard run --dry-run IMAGE -- --network none -- true` prints (the same container with run's flags:
--ipc=host, the workspace, --user); and `torchyard run IMAGE -- --network none -- true` (the installed console
script: interpreter start, imports, matrix, the host and
engine reads, doctor's chooser, the judge, then the same docker run). Every container has no network (the
same for all three, and independent of the engine's bridge). Prints a markdown snippet with medians,
the overheads and the load average. The image must be in the local engine (no pull is timed).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def timed(argv: Sequence[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="debian:bookworm-slim")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--docker", default="/usr/bin/docker")
    parser.add_argument("--goal", type=float, default=0.5)
    parser.add_argument("--phases", action="store_true", help="Only the in-process split of run's own work.")
    args = parser.parse_args()
    if args.phases:
        return phases(args.image)
    torchyard = str(Path(sys.executable).with_name("torchyard"))
    with tempfile.TemporaryDirectory(prefix="run-overhead-") as folder:
        env = dict(os.environ, TORCHYARD_DOCKER=args.docker)
        os.environ.update(env)
        cmd = ["--", "--network", "none", "--", "true"]
        printed = subprocess.run([torchyard, "run", "--dry-run", args.image, *cmd], cwd=folder,
                                 capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        same = [args.docker, *shlex.split(printed)[1:]]
        name_at = same.index("--name") + 1
        commands = {
            "plain": [args.docker, "run", "--rm", "--network", "none", args.image, "true"],
            "same line": same,
            "dry run": [torchyard, "run", "--dry-run", args.image, *cmd],
            "torchyard run": [torchyard, "run", args.image, *cmd],
        }
        times: dict[str, list[float]] = {key: [] for key in commands}
        for run in range(args.runs + 1):
            for key, argv in commands.items():
                named = [*argv[:name_at], f"run-overhead-{os.getpid()}-{run}", *argv[name_at + 1 :]]
                took = timed(named if key == "same line" else argv, folder)
                if run:  # the first round warms caches up
                    times[key].append(took)
    report(args, printed, times)
    overhead = statistics.median(times["torchyard run"]) - statistics.median(times["plain"])
    return 0 if overhead < args.goal else 1


def report(args: argparse.Namespace, printed: str, times: dict[str, list[float]]) -> None:
    med = {key: statistics.median(values) for key, values in times.items()}
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Command: `python bench/run_overhead.py --image {args.image} --runs {args.runs}`; {args.runs} interleaved "
          f"runs of each after one warm-up round; load average after the runs: {load} (1 / 5 / 15 min).\n")  # fmt: skip
    print(f"torchyard's line: `{printed}`\n")
    print("| command | median (s) | min (s) | max (s) |\n|---|---|---|---|")
    for key, values in times.items():
        print(f"| {key} | {med[key]:.3f} | {min(values):.3f} | {max(values):.3f} |")
    overhead = med["torchyard run"] - med["plain"]
    print(f"\nOverhead over a plain docker run: {overhead:.3f} s (goal < {args.goal} s: "
          f"{'met' if overhead < args.goal else 'NOT met'}); over the same line run directly: "
          f"{med['torchyard run'] - med['same line']:.3f} s.")  # fmt: skip


def phases(image: str) -> int:
    """run's steps before `docker run`, timed in this process (a fresh interpreter: run it once per figure)."""
    marks = [("start", time.perf_counter())]
    from builder.cli import run_cmd  # noqa: F401  (click, the model, the resolver, doctor)
    from builder.engine.quick import QuickEngine
    from builder.host.identity import caller
    from builder.host.launch import RunRequest, prepare
    from builder.host.probe import probe
    from builder.host.runtime import read_runtime
    from builder.host.system import RealSystem
    from builder.matrix import load_matrix

    marks.append(("import the command", time.perf_counter()))
    m = load_matrix()
    marks.append(("load and validate matrix.toml", time.perf_counter()))
    system, engine = RealSystem(), QuickEngine()
    host, runtime = probe(m, system), read_runtime(system, engine.daemon_info)
    marks.append(("read the host (nvidia-smi ...) and the engine (docker info)", time.perf_counter()))
    prepare(m, host, runtime, RunRequest(image=image, workspace=os.getcwd(), who=caller()), engine)
    marks.append(("choose (doctor), inspect and judge the image", time.perf_counter()))
    print("| phase | seconds |\n|---|---|")
    for (_, before), (name, after) in itertools.pairwise(marks):
        print(f"| {name} | {after - before:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
