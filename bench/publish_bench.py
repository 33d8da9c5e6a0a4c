"""Publishing the set: wall time and bytes pushed, cold, warm (nothing changed), after a one-line change.

    python bench/publish_bench.py [--only GLOB] [--keep-build-cache] [--markdown]

Cold: an empty registry (a fresh docker-registry on 127.0.0.1:5003) and, unless --keep-build-cache, a
pruned BuildKit cache. Warm: the same command again. One-line change: the same set with one entry
changed (an extra pip package for the devel image), which must rebuild that image only. Weekly refresh:
the set again with `--refresh` (what the weekly publish does): every image rebuilt with an apt upgrade.
Bytes pushed are the growth of the registry's storage directory. Needs a Docker engine (scripts/services start).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
PORT = 5003
SET = """
[[publish]]
name = "bench"
torch = "==2.14.1"
os = ["debian12"]
flavors = ["runtime", "devel"]
"""
CHANGED = SET.replace('flavors = ["runtime", "devel"]', 'flavors = ["runtime"]') + (
    '\n[[publish]]\nname = "bench-devel"\ntorch = "==2.14.1"\nos = ["debian12"]\nflavors = ["devel"]\n'
    'pip = ["six==1.16.0"]\n'
)


@dataclass
class Phase:
    name: str
    seconds: float
    pushed_bytes: int
    statuses: dict[str, str]


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def matrix_with(publish: str, folder: Path, name: str) -> Path:
    text = (ROOT / "matrix.toml").read_text()
    path = folder / f"{name}.toml"
    path.write_text(text[: text.index("[[publish]]")] + publish)
    return path


def run_phase(name: str, matrix: Path, storage: Path, folder: Path, *extra: str) -> Phase:
    before = du(storage)
    report = folder / f"{name}.json"
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "--matrix",
            str(matrix),
            "publish",
            "--repo",
            f"127.0.0.1:{PORT}/bench/torch",
            "-o",
            str(folder / name),
            "--report",
            str(report),
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{name}: publish failed (logs under {folder / name})\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    data = json.loads(report.read_text())
    return Phase(name, seconds, du(storage) - before, {i["id"]: i["status"] for i in data["items"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep-build-cache", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.gettempdir()) / "torchyard-publish-bench"  # kept afterwards: logs, reports
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    storage = folder / "registry"
    storage.mkdir()
    config = folder / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage: {{filesystem: {{rootdirectory: {storage}}}}}\nhttp: {{addr: 127.0.0.1:{PORT}}}\n"
    )
    registry = subprocess.Popen(
        ["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(2)
        if not args.keep_build_cache:
            subprocess.run([DOCKER, "builder", "prune", "-af"], check=True, capture_output=True)
        base = matrix_with(SET, folder, "set")
        phases = [
            run_phase("cold", base, storage, folder),
            run_phase("warm", base, storage, folder),
            run_phase("one-line change", matrix_with(CHANGED, folder, "changed"), storage, folder),
            run_phase("weekly refresh", base, storage, folder, "--refresh", "bench-refresh"),
        ]
    finally:
        registry.terminate()
    if not args.markdown:
        print(json.dumps([vars(p) for p in phases], indent=2))
        return
    cache = "kept" if args.keep_build_cache else "pruned"
    print(
        f"Command: `python bench/publish_bench.py --markdown{' --keep-build-cache' if args.keep_build_cache else ''}`"
        f" (set: torch 2.14.1 cu130 runtime + devel on debian12; empty registry; BuildKit cache {cache}).\n"
    )
    print("| phase | wall time | bytes pushed | images |")
    print("|---|---|---|---|")
    for p in phases:
        counts = ", ".join(f"{s}: {n}" for s, n in sorted(_count(p.statuses).items()))
        print(f"| {p.name} | {p.seconds:.1f} s | {p.pushed_bytes / 1e6:,.1f} MB | {counts} |")


def _count(statuses: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


if __name__ == "__main__":
    main()
