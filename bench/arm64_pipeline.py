"""`torchyard build --platform linux/arm64 --push` end to end on this x86_64 machine, by emulation (QEMU).

The small arm64 image (torch 2.5.1's aarch64 wheel on PyPI is the CPU build, a few hundred MB) built from the
local multi-platform base (scripts/services, through --registry-mirror), its scaled smoke suite run emulated
(--small, timeouts x10), pushed to the local registry, pulled back by digest and run as aarch64, then built again
and found up to date in the registry. Until 2026-12-02 this ran in the docker tier (tests/integration/test_arm64.py),
where it was 14 minutes of the CI's 50: emulated builds belong in bench/ (the docker tier keeps the platform logic
with stand-in images, and QEMU's handler in a container). Each step is timed; every check prints PASS or FAIL and
the script exits 1 when one failed.

    sudo scripts/services start
    python bench/arm64_pipeline.py [--repo 127.0.0.1:5000/torchyard-bench/arm64-pipeline] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = os.environ.get("TORCHYARD_DOCKER", "/usr/bin/docker")
MIRROR = "127.0.0.1:5000/torchyard-base"
FLAGS = ["--platform", "linux/arm64", "--torch", "2.5.1", "--variant", "cpu", "--os", "debian12", "--python", "3.11",
         "--registry-mirror", MIRROR]  # fmt: skip
TAG = "2.5.1-cpu-py3.11-debian12-runtime-arm64"


def _run(argv: list[str]) -> tuple[int, str, float]:
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def _torchyard(*args: str) -> tuple[int, str, float]:
    return _run([sys.executable, "-m", "builder", *args])


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail and not ok else ""))
        self.failed += not ok

    def timed(self, name: str, seconds: float) -> None:
        print(f"TIME  {name}: {seconds:.1f} s")


def _pushed_digest(out: str, repo: str) -> str:
    for line in out.splitlines():
        if f"pushed {repo}:{TAG} (" in line:
            return line.rsplit("(", 1)[1].rstrip(")")
    return ""


def _report_checks(checks: Checks, out_dir: Path) -> None:
    report = json.loads((out_dir / "smoke-runtime.json").read_text())
    by_name = {c["name"]: c for c in report["checks"]}
    checks.check("the suite ran emulated as aarch64, scaled", (report["machine"], report["small"]) == ("aarch64", True))
    checks.check("no check failed", report["summary"]["failed"] == 0, json.dumps(report["summary"]))
    for name in ("version.torch", "train.cpu", "compile.cpu", "ddp.cpu", "determinism.cpu"):
        checks.check(f"{name} passed", by_name[name]["status"] == "passed", by_name[name]["message"])
    checks.timed("the smoke suite (its own time)", float(report["seconds"]))
    for name in ("train.cpu", "compile.cpu", "ddp.cpu", "determinism.cpu"):
        checks.timed(f"  {name}", float(by_name[name]["seconds"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=f"127.0.0.1:5000/torchyard-bench/arm64-pipeline-{int(time.time())}")
    parser.add_argument("--out", type=Path, default=None, help="the build's output folder (default: a temporary one)")
    args = parser.parse_args()
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="arm64-pipeline-")) / "ctx"
    checks = Checks()
    code, out, seconds = _torchyard("build", *FLAGS, "--repo", args.repo, "--push", "-o", str(out_dir))
    checks.timed("torchyard build --platform linux/arm64 --push (build, smoke suite, push)", seconds)
    checks.check("the build passed and pushed", code == 0, out[-3000:])
    if code != 0:
        return 1
    checks.check("it said it runs emulated", "linux/arm64 runs emulated on this linux/amd64 engine" in out)
    _report_checks(checks, out_dir)
    digest = _pushed_digest(out, args.repo)
    ref = f"{args.repo}@{digest}"
    uname = [DOCKER, "run", "--rm", "--platform", "linux/arm64", "--entrypoint", "uname", ref, "-m"]
    steps: list[tuple[str, Callable[[], tuple[int, str, float]], str]] = [
        ("pulled back by digest", lambda: _run([DOCKER, "pull", ref]), ""),
        ("runs as aarch64", lambda: _run(uname), "aarch64"),
    ]
    for name, step, expected in steps:
        code, text, seconds = step()
        checks.check(name, code == 0 and expected in text, text[-500:])
        checks.timed(name, seconds)
    code, out, seconds = _torchyard("build", *FLAGS, "--repo", args.repo, "--push", "-o", str(out_dir), "--force")
    checks.check("a second build finds it up to date", code == 0 and "is up to date in the registry" in out, out[-800:])
    checks.timed("the second build", seconds)
    print(f"{'all checks passed' if not checks.failed else f'{checks.failed} check(s) FAILED'}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
