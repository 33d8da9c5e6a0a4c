"""Wall time of `torchyard --help` and of every `torchyard COMMAND --help` (issue 38; goal: < 0.3 s each).

    python bench/help_time.py [--runs 7] [--checkout PATH]

Each run is a whole process, as a shell starts one: this interpreter with the checkout's builder/ first on the
path (`--checkout` names another checkout, e.g. a `git worktree` of an older commit, to measure it the same way).
Prints a markdown table: the median and the slowest of the runs after one warm-up, and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("doctor", "lookup", "explain", "inspect", "matrix", "render", "build", "smoke", "publish", "promote",
            "lock", "run", "verify-image")  # fmt: skip
GOAL = 0.3


def seconds(checkout: Path, argv: list[str], runs: int) -> tuple[float, float]:
    command = [sys.executable, "-c", "import sys; from builder.cli.main import main; main(sys.argv[1:])", *argv]
    # cwd too: `python -c` puts the working folder first on sys.path, before PYTHONPATH
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    subprocess.run(
        command, env=env, cwd=checkout, capture_output=True, check=False
    )  # warm-up: the page cache, not counted
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, cwd=checkout, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--checkout", type=Path, default=ROOT)
    args = parser.parse_args()
    rows, met = [], True
    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        median, worst = seconds(args.checkout.resolve(), argv, args.runs)
        met = met and median < GOAL
        rows.append(
            f"| `torchyard {' '.join(argv)}` | {median:.3f} | {worst:.3f} | {'met' if median < GOAL else 'NOT met'} |"
        )
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"Command: `python bench/help_time.py --runs {args.runs} --checkout {args.checkout}`; load average {load} "
          f"on {os.cpu_count()} CPUs when it ended.\n")  # fmt: skip
    print(f"| command | median (s) | max (s) | < {GOAL} s |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
