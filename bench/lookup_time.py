"""Whole-process wall time of `torchyard lookup` against `python -c pass` (issue 2; target < 0.3 s).

    python bench/lookup_time.py [--runs 15] [--target 0.3] [--check] [--keep-env] [--phases]

Runs the `torchyard` console script installed next to sys.executable, so the number includes the
interpreter start, imports, loading and validating matrix.toml, resolving and printing: what a user
waits for. Each command gets one warm-up run first (not counted). By default PYTHONDONTWRITEBYTECODE
is removed from the children's environment, so the warm-up leaves the .pyc files a `pip install`
would have compiled; --keep-env measures with the environment as it is. Prints a markdown snippet.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LOOKUP_ARGS = ("lookup", "--driver", "535", "--gpu", "RTX 4090")

# Run in a child interpreter by --phases: where one lookup's time goes, by perf_counter marks.
_PHASES = """
import time
t0 = time.perf_counter()
import builder.cli.main, builder.cli.lookup_cmd
t1 = time.perf_counter()
from builder.matrix import load_matrix
from builder.resolve.query import RawQuery, parse_query
from builder.resolve.resolver import lookup
m = load_matrix()
t2 = time.perf_counter()
found = lookup(m, parse_query(m, RawQuery(driver="535", gpus=("RTX 4090",))))
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


@dataclass(frozen=True)
class Timing:
    label: str
    argv: tuple[str, ...]
    seconds: tuple[float, ...]  # wall time per run
    cpu: tuple[float, ...]  # user + system CPU time per run: less sensitive to other load

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    @property
    def p90(self) -> float:
        """Nearest-rank 90th percentile."""
        ordered = sorted(self.seconds)
        return ordered[math.ceil(0.9 * len(ordered)) - 1]


def console_script(name: str) -> Path:
    script = Path(sys.executable).with_name(name)
    if not script.exists():
        raise SystemExit(f"bench: {script} not found; install the project first (pip install -e '.[dev]')")
    return script


def child_env(keep: bool) -> dict[str, str]:
    env = dict(os.environ)
    if not keep:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(label: str, argv: Sequence[str], runs: int, env: dict[str, str]) -> Timing:
    def once() -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    once()  # warm-up: page cache, .pyc files
    runs_ = [once() for _ in range(runs)]
    return Timing(label, tuple(argv), tuple(w for w, _ in runs_), tuple(c for _, c in runs_))


def phases(runs: int, env: dict[str, str]) -> list[tuple[str, float]]:
    """Median seconds of the in-process phases: imports, loading + validating matrix.toml, resolving."""
    rows = []
    for _ in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", _PHASES], check=True, capture_output=True, text=True, env=env)
        rows.append(tuple(float(x) for x in out.stdout.split()))
    rows = rows[1:]  # the first run is the warm-up
    names = ("import the CLI (click, the model, the resolver)", "load and validate matrix.toml", "resolve the lookup")
    return [(name, statistics.median(r[i] for r in rows)) for i, name in enumerate(names)]


def snippet(timings: Sequence[Timing], runs: int, target: float, keep_env: bool, invocation: str) -> str:
    lookup, baseline = timings
    lines = [
        f"Command: `torchyard {' '.join(_quote(a) for a in LOOKUP_ARGS)}` vs `python -c pass`, "
        f"{runs} runs each after one warm-up run (`{invocation}`).",
        "",
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; bytecode cache: {'as the environment says' if keep_env else 'on'}; "
        f"load average after the runs: {_load_average()}.",
        "",
        "| command | median (s) | p90 (s) | CPU median (s) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {t.label} | {t.median:.3f} | {t.p90:.3f} | {t.cpu_median:.3f} |" for t in timings]
    lines += [
        "",
        f"torchyard's own share (median minus the bare interpreter): {lookup.median - baseline.median:.3f} s. "
        f"Target: median < {target:.2f} s: {'met' if lookup.median < target else 'NOT met'}.",
    ]
    return "\n".join(lines)


def _load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"
    except OSError:
        return "unknown"


def _quote(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per command (default 15)")
    parser.add_argument("--target", type=float, default=0.3, help="median target in seconds (default 0.3)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the lookup median misses the target")
    parser.add_argument("--keep-env", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if it is set")
    parser.add_argument("--phases", action="store_true", help="also time the in-process phases of one lookup")
    given = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(given)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    env = child_env(args.keep_env)
    timings = [
        measure("`torchyard lookup`", [str(console_script("torchyard")), *LOOKUP_ARGS], args.runs, env),
        measure("`python -c pass`", [sys.executable, "-c", "pass"], args.runs, env),
    ]
    invocation = " ".join(["python bench/lookup_time.py", *given])
    print(snippet(timings, args.runs, args.target, args.keep_env, invocation))
    if args.phases:
        print("\n| phase (in-process, median) | seconds |\n|---|---|")
        for name, seconds in phases(args.runs, env):
            print(f"| {name} | {seconds:.3f} |")
    return 1 if args.check and timings[0].median >= args.target else 0


if __name__ == "__main__":
    sys.exit(main())
