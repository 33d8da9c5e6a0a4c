"""`torchyard matrix verify` of the whole matrix, cold (an empty --offline-cache) and again from the cache:
wall time, requests, bytes received, answers served from the cache (issue 13; goals: cold < 60 s and
< 100 MB, from the cache < 1 s).

    python bench/verify_bench.py [--matrix FILE] [--runs 3] [--markdown]

Runs the `torchyard` console script next to sys.executable as a user does (its JSON report gives the
cost), each phase --runs times; cold runs each get a new cache directory. Upstream that cannot be reached
from the machine (here: download.pytorch.org, the container registries) is retried once and reported
unreachable by verify; the numbers then cover what was reachable, and the report says which hosts were
not. Two more configurations isolate the costs: the PyPI part alone (PyTorch's index pointed at a closed
port), and every host answering (PyTorch's index and the Docker Hub mirror pointed at a local server that
answers 404, which the cache keeps): the rerun then sends no request at all.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TORCHYARD = str(Path(sys.executable).with_name("torchyard"))


@dataclass(frozen=True)
class Phase:
    label: str
    seconds: list[float]
    reports: list[dict[str, Any]]

    def row(self) -> list[str]:
        cost = self.reports[-1]["cost"]
        hosts = sorted(
            {
                f["upstream"].split(" is unreachable")[0]
                for r in self.reports[-1:]
                for f in r["findings"]
                if f["status"] == "unreachable"
            }
        )
        return [
            self.label,
            f"{statistics.median(self.seconds):.2f} s (min {min(self.seconds):.2f})",
            str(cost["requests"]),
            f"{cost['bytes'] / 1e6:.1f} MB",
            str(cost["cache_hits"]),
            f"{self.reports[-1]['exit_code']}",
            ", ".join(hosts) or "-",
        ]


def run(args: list[str], cache: Path) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    done = subprocess.run(
        [TORCHYARD, *args, "--offline-cache", str(cache), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1, 5):
        raise SystemExit(f"verify failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return seconds, report


def phases(matrix: list[str], extra: list[str], runs: int, label: str) -> list[Phase]:
    args = [*matrix, "matrix", "verify", *extra]
    cold_s, cold_r, warm_s, warm_r = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="torchyard-verify-bench-") as tmp:
        for i in range(runs):
            cache = Path(tmp) / f"cache-{i}"
            seconds, report = run(args, cache)
            cold_s.append(seconds)
            cold_r.append(report)
        for _ in range(runs):
            seconds, report = run(args, Path(tmp) / f"cache-{runs - 1}")
            warm_s.append(seconds)
            warm_r.append(report)
    return [Phase(f"{label}, cold", cold_s, cold_r), Phase(f"{label}, from the cache", warm_s, warm_r)]


@contextlib.contextmanager
def not_found_server() -> Any:
    """A local server that answers 404 to everything (a stand-in for hosts this machine cannot reach)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matrix", help="matrix.toml (default: the packaged one)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    matrix = ["--matrix", options.matrix] if options.matrix else []
    results = phases(matrix, [], options.runs, "whole matrix")
    pypi_only = ["--only", "torch,companions", "--pytorch-index-url", "http://127.0.0.1:9/whl"]
    results += phases(matrix, pypi_only, options.runs, "PyPI part only")
    with not_found_server() as stub:
        answering = ["--pytorch-index-url", f"http://{stub}/whl", "--registry-mirror", stub]
        results += phases(matrix, answering, options.runs, "every host answers (a 404 stub for the unreachable ones)")
    headers = ["phase", "wall time", "requests", "received", "cache hits", "exit", "unreachable (not checked)"]
    rows = [p.row() for p in results]
    counts = results[0].reports[-1]["counts"]
    if options.markdown:
        print(f"Command: `python bench/verify_bench.py --runs {options.runs} --markdown`\n")
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print("\nFindings of the whole-matrix run: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    else:
        for row in rows:
            print("  ".join(row))


if __name__ == "__main__":
    main()
