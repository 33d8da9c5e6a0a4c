"""Wall time of `torchyard doctor` on a machine with a GPU, through a recorded nvidia-smi (issue 9; target < 2 s).

    python bench/doctor_time.py [--runs 10] [--target 2.0]

Puts a stand-in `nvidia-smi` first on PATH that prints what nvidia-smi printed on an RTX 4090 with the 535
driver (tests/unit/host_kit.py), then runs the installed `torchyard doctor --json` (a whole process: interpreter
start, imports, the probe, `docker info` against the engine when one runs, the lookup). Prints a markdown snippet.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORDED = "0, NVIDIA GeForce RTX 4090, 8.9, 24564, 535.104.05, [N/A]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--target", type=float, default=2.0)
    args = parser.parse_args()
    torchyard = Path(sys.executable).with_name("torchyard")
    with tempfile.TemporaryDirectory() as tmp:
        smi = Path(tmp) / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\necho '{RECORDED}'\n")
        smi.chmod(0o755)
        env = dict(os.environ, PATH=f"{tmp}:{os.environ['PATH']}")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        argv = [str(torchyard), "doctor", "--json"]
        first = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)  # warm-up, not counted
        data = json.loads(first.stdout)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(argv, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    engine = "a Docker engine answering" if data["docker"] else "no Docker engine"
    print(f"Command: `torchyard doctor --json` with a recorded nvidia-smi ({RECORDED}), {engine}; "
          f"{args.runs} runs after one warm-up (`python bench/doctor_time.py`).\n")  # fmt: skip
    print(f"Recommended: {data['recommended']['id']}; problems: {', '.join(p['check'] for p in data['problems'])}\n")
    print("| median (s) | max (s) |\n|---|---|")
    print(f"| {median:.3f} | {max(times):.3f} |\n")
    print(f"Target: median < {args.target:.1f} s: {'met' if median < args.target else 'NOT met'}.")
    return 0 if median < args.target else 1


if __name__ == "__main__":
    sys.exit(main())
