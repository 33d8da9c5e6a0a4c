"""Build speed and image size: torchyard's runtime image next to a single-stage tutorial Dockerfile.

For each: a cold build (BuildKit cache pruned), a warm rebuild (nothing changed), a rebuild after a
one-line change in the last stage, and the image size; for torchyard also what the image is made of
(base image + apt layer + venv) to show the overhead. Needs a Docker engine (scripts/services start).

    python bench/build_bench.py [--torch 2.14.1] [--markdown]

WARNING: prunes the engine's BuildKit cache (docker builder prune -af) before each cold build.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
CA = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")
REPO = "torchyard-bench/torch"


def sh(argv: list[str], **env: str) -> float:
    start = time.monotonic()
    done = subprocess.run(
        argv, env=dict(os.environ, DOCKER_BUILDKIT="1", **env), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def prune() -> None:
    sh([DOCKER, "builder", "prune", "-af"])


def size(ref: str) -> int:
    return int(
        subprocess.run(
            [DOCKER, "image", "inspect", "-f", "{{.Size}}", ref], capture_output=True, text=True, check=True
        ).stdout.strip()
    )


def layers(ref: str) -> list[tuple[int, str]]:
    out = subprocess.run(
        [DOCKER, "history", "--no-trunc", "--format", "{{json .}}", ref], capture_output=True, text=True, check=True
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return [(_bytes(r["Size"]), r["CreatedBy"]) for r in rows]


def _bytes(text: str) -> int:
    units = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for unit, factor in sorted(units.items(), key=lambda u: -len(u[0])):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def torchyard(torch: str, *extra: str) -> float:
    argv = [
        sys.executable,
        "-m",
        "builder",
        "build",
        "--torch",
        torch,
        "--os",
        "debian12",
        "--python",
        "3.11",
        "--repo",
        REPO,
        "-o",
        str(Path(tempfile.gettempdir()) / "torchyard-bench"),
        *extra,
    ]
    return sh(argv)


def raw_build(context: Path, dockerfile: Path, tag: str, *extra: str) -> float:
    return sh(
        [DOCKER, "build", "--secret", f"id=cacert,src={CA}", "-f", str(dockerfile), "-t", tag, *extra, str(context)]
    )


def bench_torchyard(torch: str) -> dict[str, float]:
    prune()
    cold = torchyard(torch)
    warm_skip = torchyard(torch)  # torchyard: same content hash already built -> no build at all
    context = Path(tempfile.gettempdir()) / "torchyard-bench"
    warm_docker = raw_build(context, context / "Dockerfile", "torchyard-bench/raw:warm", "--target", "runtime")
    late = torchyard(torch, "--label", f"bench.run={int(time.time())}")  # LABEL is the last stage's last line
    ref = f"{REPO}:{torch}-cuda13.0-cudnn9-py3.11-debian12-runtime"
    parts = layers(ref)
    base = sum(s for s, created in parts if "ADD file" in created or created == "" or "import" in created.lower())
    apt = sum(s for s, created in parts if "apt-get" in created)
    venv = sum(s for s, created in parts if "COPY" in created and ("/opt/venv" in created or "/layers/" in created))
    return {
        "cold_s": cold,
        "warm_torchyard_s": warm_skip,
        "warm_docker_s": warm_docker,
        "late_change_s": late,
        "size": size(ref),
        "base": base,
        "apt": apt,
        "venv": venv,
    }


def bench_tutorial() -> dict[str, float]:
    prune()
    dockerfile = ROOT / "bench" / "tutorial.Dockerfile"
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp)
        cold = raw_build(context, dockerfile, "torchyard-bench/tutorial:cold")
        warm = raw_build(context, dockerfile, "torchyard-bench/tutorial:warm")
        changed = context / "Dockerfile.changed"
        changed.write_text(dockerfile.read_text() + f'LABEL bench.run="{int(time.time())}"\n')
        late = raw_build(context, changed, "torchyard-bench/tutorial:late")
    return {"cold_s": cold, "warm_docker_s": warm, "late_change_s": late, "size": size("torchyard-bench/tutorial:cold")}


def markdown(t: dict[str, float], s: dict[str, float], torch: str) -> str:
    gb = 1e9
    payload = t["base"] + t["apt"] + t["venv"]
    lines = [
        f"Command: `python bench/build_bench.py --torch {torch} --markdown` "
        "(BuildKit cache pruned before each cold build).",
        "",
        "| | torchyard runtime (`torchyard build`) | single-stage tutorial Dockerfile |",
        "|---|---|---|",
        f"| cold build | {t['cold_s']:.0f} s (incl. smoke suite) | {s['cold_s']:.0f} s |",
        f"| warm rebuild, nothing changed | {t['warm_torchyard_s']:.1f} s (torchyard: up to date, no build); "
        f"{t['warm_docker_s']:.1f} s (plain docker build, cached) | {s['warm_docker_s']:.1f} s |",
        f"| one-line change in the last stage | {t['late_change_s']:.0f} s (incl. smoke suite) | "
        f"{s['late_change_s']:.1f} s |",
        f"| image size | {t['size'] / gb:.2f} GB | {s['size'] / gb:.2f} GB |",
        "",
        f"torchyard runtime = base image {t['base'] / 1e6:.0f} MB + apt layer {t['apt'] / 1e6:.0f} MB "
        f"+ venv {t['venv'] / gb:.2f} GB = {payload / gb:.2f} GB of payload; the image is "
        f"{(t['size'] / payload - 1) * 100:+.2f}% of that.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torch", default="2.14.1")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    t = bench_torchyard(args.torch)
    s = bench_tutorial()
    print(markdown(t, s, args.torch) if args.markdown else json.dumps({"torchyard": t, "tutorial": s}, indent=2))


if __name__ == "__main__":
    main()
