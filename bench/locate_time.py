"""Wall time of `torchyard doctor` and `torchyard lookup --here` with the image-location look-up (issue 18;
goal: < 1 s with a reachable registry, < 2.5 s when the registry does not answer).

    python bench/locate_time.py [--runs 5] [--registry 127.0.0.1:5000]

Three cases per command, each a whole process (interpreter start, imports, the probe, `docker info`, the lookup,
the location look-up): the image in the team's repository (a stand-in pushed under the recommended tag to the
local registry first), a reachable registry without it, and a port on loopback that accepts connections and
never answers (the look-up's short timeout). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from builder.core.kinds import Flavor, Strategy
from builder.host.locate import Wanted, locate
from builder.lock.resolve_id import find_combination
from builder.matrix.loader import load_matrix
from builder.render.context import labels as image_labels
from builder.render.options import RenderOptions
from builder.resolve.verdict import Answer

DOCKER = "/usr/bin/docker"


def timed(argv: list[str], runs: int) -> tuple[float, float, dict[str, object]]:
    first = subprocess.run(argv, capture_output=True, text=True, check=True)  # warm-up, not counted
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times), json.loads(first.stdout)


def stand_in(repo: str, tag: str, ident: str) -> None:
    """debian:bookworm-slim with the labels of the recommended combination's runtime image, under its tag in the
    local registry: the look-up reads the tags list, a manifest and the config (the labels say what it holds)."""
    c = find_combination(load_matrix(), ident)
    assert c is not None, ident
    labels = image_labels(c, Flavor.RUNTIME, Strategy.WHEELS, c.sass or (), None, RenderOptions())
    dockerfile = "FROM debian:bookworm-slim\n" + "".join(f"LABEL {k}={json.dumps(v)}\n" for k, v in labels)
    env = {**os.environ, "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"}
    subprocess.run([DOCKER, "build", "-q", "-t", f"{repo}:{tag}", "-"], input=dockerfile.encode(), env=env, check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([DOCKER, "push", "-q", f"{repo}:{tag}"], check=True, capture_output=True)
    subprocess.run([DOCKER, "rmi", f"{repo}:{tag}"], check=True, capture_output=True)  # only in the registry


def silent_server() -> int:
    """A port on loopback that accepts connections and never answers: the look-up's timeout is what it costs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            held.append(server.accept()[0])  # kept open, never read nor answered

    threading.Thread(target=accept, daemon=True).start()
    return int(server.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--registry", default="127.0.0.1:5000")
    args = parser.parse_args()
    dead = silent_server()
    torchyard = str(Path(sys.executable).with_name("torchyard"))
    found, missing = f"{args.registry}/locate-bench/torchyard", f"{args.registry}/locate-bench/absent"
    chosen = json.loads(subprocess.run([torchyard, "doctor", "--json"], capture_output=True, check=True).stdout)
    tag, ident = chosen["recommended"]["image"].rsplit(":", 1)[1], chosen["recommended"]["id"]
    stand_in(found, tag, ident)
    cases = [
        ("none (no --repo: the local engine only)", None),
        ("in the repository", found),
        ("reachable, not there", missing),
        ("not answering", f"127.0.0.1:{dead}/x/y"),
    ]
    rows, ok = [], True
    for command in (["doctor", "--json"], ["lookup", "--here", "--json", "--limit", "1"]):
        for label, repo in cases:
            median, worst, data = timed([torchyard, *command, *(["--repo", repo] if repo else [])], args.runs)
            where = data["recommended"]["where"] if command[0] == "doctor" else data["where"]  # type: ignore[index]
            goal = 2.5 if label == "not answering" else 1.0
            ok = ok and median < goal
            rows.append(f"| `{' '.join(command[:2])}` | {label} | {where['where']} | {median:.3f} | {worst:.3f} | "  # type: ignore[index]
                        f"< {goal} s: {'met' if median < goal else 'NOT met'} |")  # fmt: skip
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"Command: `python bench/locate_time.py --runs {args.runs}`; {args.runs} runs per case after one warm-up; "
          f"load average {load} on {os.cpu_count()} CPUs when it ended.\n")  # fmt: skip
    print("| command | registry | found | median (s) | max (s) | goal |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nThe look-up alone, in one process (builder.host.locate.locate, the engine not asked):\n")
    print("| registry | found | median (s) | max (s) |\n|---|---|---|---|")
    wanted = Wanted(ident, tag, "linux/amd64", "", "")
    for label, repo in cases[1:]:
        assert repo is not None
        times, where = [], ""
        for _ in range(args.runs):
            start = time.perf_counter()
            where = locate(wanted, lambda *_: Answer.RUNS, local=None, repo=repo).where.value
            times.append(time.perf_counter() - start)
        print(f"| {label} | {where} | {statistics.median(times):.3f} | {max(times):.3f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
