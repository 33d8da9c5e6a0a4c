"""Wall time of the smoke suite on CPU, in the image (issue 5; target < 90 s for runtime images).

    python bench/smoke_time.py [IMAGE ...] [--runs 3] [--via torchyard|docker] [--host-copy]
                               [--docker CLI] [--target 90] [--check]

Runs the whole suite, without a GPU, N times per image (default: ty-test:runtime), either as
`torchyard smoke IMAGE --report FILE` (--via torchyard, the default) or as the `docker run` that
command amounts to (--via docker: no network, 2 GB of shared memory, a host folder for the report
at /torchyard-out). Each run gives the command's wall time (container start and removal included),
the suite's own time and every check's time from its JSON report; the snippet printed (markdown)
has the medians. --host-copy mounts this checkout's builder/smoke instead of the image's
/opt/torchyard/smoke, which may be older than the checkout. The image's flavor (runtime / devel)
is read from its io.torchyard.flavor label; the target applies to runtime and inference images.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HOST_SMOKE = ROOT / "builder" / "smoke"
IN_IMAGE_SMOKE = "/opt/torchyard/smoke"
MOUNTED_SMOKE = "/opt/torchyard-host/smoke"
OUT = "/torchyard-out"
TIMED = ("runtime", "inference")  # the flavors the target applies to (inference: runtime + the ONNX checks)
SHOWN = 0.05  # checks faster than this (median, seconds) are summed into one line


@dataclass(frozen=True)
class Run:
    wall: float  # the whole command, as a user waits for it
    suite: float  # the suite's own time, from its JSON ("seconds")
    checks: dict[str, tuple[str, float]]  # name -> (status, seconds)
    exit_code: int


@dataclass(frozen=True)
class Measured:
    image: str
    flavor: str
    torch: str
    argv: tuple[str, ...]  # as printed: the temporary report folder is $OUT
    runs: tuple[Run, ...]

    def median(self, values: Sequence[float]) -> float:
        return statistics.median(values)

    @property
    def wall(self) -> float:
        return self.median([r.wall for r in self.runs])

    @property
    def suite(self) -> float:
        return self.median([r.suite for r in self.runs])

    def check_rows(self) -> list[tuple[str, str, float]]:
        names = list(self.runs[-1].checks)
        rows = []
        for name in names:
            statuses = {r.checks[name][0] for r in self.runs if name in r.checks}
            status = statuses.pop() if len(statuses) == 1 else "varies"
            rows.append((name, status, self.median([r.checks[name][1] for r in self.runs if name in r.checks])))
        return rows


def docker_cli(given: str | None) -> str:
    found = given or os.environ.get("TORCHYARD_DOCKER") or shutil.which("docker")
    if not found:
        raise SystemExit("bench: no docker CLI found (give --docker)")
    return found


def label(docker: str, image: str, key: str) -> str:
    out = subprocess.run(
        [docker, "image", "inspect", "--format", f'{{{{index .Config.Labels "{key}"}}}}', image],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"bench: no image {image!r} in the engine: {out.stderr.strip()}")
    value = out.stdout.strip()
    return value if value and value != "<no value>" else "?"


def command(image: str, via: str, host_copy: bool, out: Path, docker: str) -> list[str]:
    if via == "torchyard":
        script = Path(sys.executable).with_name("torchyard")
        if not script.exists():
            raise SystemExit(f"bench: {script} not found; install the project first (pip install -e '.[dev]')")
        return [str(script), "smoke", image, "--report", str(out / "smoke.json"), *(["--host-copy"] * host_copy)]
    mounts = ["-v", f"{out}:{OUT}"] + (["-v", f"{HOST_SMOKE}:{MOUNTED_SMOKE}:ro"] if host_copy else [])
    suite = MOUNTED_SMOKE if host_copy else IN_IMAGE_SMOKE
    return [docker, "run", "--rm", "--network", "none", "--shm-size", "2g", *mounts, image, "python", suite]


def once(image: str, via: str, host_copy: bool, docker: str) -> tuple[list[str], Run]:
    with tempfile.TemporaryDirectory(prefix="torchyard-bench-") as tmp:
        out = Path(tmp)
        os.chmod(out, 0o777)  # the suite may run as the image's non-root user
        argv = command(image, via, host_copy, out, docker)
        if via == "docker":
            argv += ["--json", f"{OUT}/smoke.json"]
        start = time.perf_counter()
        done = subprocess.run(argv, check=False, capture_output=True, text=True)
        wall = time.perf_counter() - start
        report = out / "smoke.json"
        if not report.exists():
            tail = (done.stdout + done.stderr).strip()[-800:]
            raise SystemExit(f"bench: `{shlex.join(argv)}` exited {done.returncode} without a report:\n{tail}")
        data: dict[str, Any] = json.loads(report.read_text())
    checks = {c["name"]: (str(c["status"]), float(c["seconds"])) for c in data["checks"]}
    return _shown(argv, out), Run(wall, float(data["seconds"]), checks, done.returncode)


def measure(image: str, runs: int, via: str, host_copy: bool, docker: str, log: bool) -> Measured:
    flavor, torch = label(docker, image, "io.torchyard.flavor"), label(docker, image, "io.torchyard.torch")
    done: list[Run] = []
    argv: list[str] = []
    for index in range(runs):
        argv, run = once(image, via, host_copy, docker)
        done.append(run)
        if log:
            print(f"bench: {image} run {index + 1}/{runs}: {run.wall:.1f} s (suite {run.suite:.1f} s)", file=sys.stderr)
    return Measured(image, flavor, torch, tuple(argv), tuple(done))


def snippet(found: Measured, target: float) -> str:
    shown = [row for row in found.check_rows() if row[2] >= SHOWN]
    rest = [row for row in found.check_rows() if row[2] < SHOWN]
    walls = [r.wall for r in found.runs]
    passed = sum(status == "passed" for _, status, _ in found.check_rows())
    skipped = sum(status == "skipped" for _, status, _ in found.check_rows())
    failed = len(found.check_rows()) - passed - skipped
    lines = [
        f"Image `{found.image}` (torch {found.torch}, {found.flavor}), {len(found.runs)} run"
        f"{'s' * (len(found.runs) != 1)}; command: `{_join(found.argv)}`",
        "",
        "| | median (s) | min (s) | max (s) |",
        "|---|---|---|---|",
        f"| wall time of the command | {found.wall:.1f} | {min(walls):.1f} | {max(walls):.1f} |",
        f"| the suite's own time (its JSON) | {found.suite:.1f} | {min(r.suite for r in found.runs):.1f} | "
        f"{max(r.suite for r in found.runs):.1f} |",
        "",
        "| check | result | median (s) |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {status} | {seconds:.2f} |" for name, status, seconds in shown]
    lines.append(f"| {len(rest)} other checks | | {sum(s for _, _, s in rest):.2f} in all |")
    if found.flavor in TIMED:
        goal = f"Target: median wall time < {target:.0f} s: {'met' if found.wall < target else 'NOT met'}."
    else:
        goal = f"(The {target:.0f} s target is for runtime and inference images; this one is {found.flavor}.)"
    lines += ["", f"Checks: {passed} passed, {failed} failed, {skipped} skipped (no GPU: the GPU checks skip). {goal}"]
    return "\n".join(lines)


def _shown(argv: Sequence[str], out: Path) -> list[str]:
    """The argv as printed: the temporary report folder as $OUT, the console script by its name."""
    return [Path(arg).name if arg.endswith("/torchyard") else arg.replace(str(out), "$OUT") for arg in argv]


def _join(argv: Sequence[str]) -> str:
    return " ".join(arg if arg.startswith("$OUT") else shlex.quote(arg) for arg in argv)


def machine(docker: str) -> str:
    server = subprocess.run(
        [docker, "version", "--format", "{{.Server.Version}}"], check=False, capture_output=True, text=True
    )
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), model)
    except OSError:
        pass
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return (
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({model}), no GPU; "
        f"Docker {server.stdout.strip() or '?'}; load average after the runs: {load} (1 / 5 / 15 min)."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("images", nargs="*", default=["ty-test:runtime"], help="images (default ty-test:runtime)")
    parser.add_argument("--runs", type=int, default=3, help="runs per image; medians are reported (default 3)")
    parser.add_argument("--via", choices=("torchyard", "docker"), default="torchyard", help="how to start the suite")
    parser.add_argument("--host-copy", action="store_true", help="mount this checkout's builder/smoke")
    parser.add_argument("--docker", metavar="CLI", help="docker CLI (default: $TORCHYARD_DOCKER, else PATH)")
    parser.add_argument("--target", type=float, default=90.0, help="runtime images' target in seconds (default 90)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a runtime image misses the target")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    docker = docker_cli(args.docker)
    found = [measure(image, args.runs, args.via, args.host_copy, docker, not args.quiet) for image in args.images]
    print(f"`python bench/smoke_time.py {shlex.join(sys.argv[1:] if argv is None else list(argv))}`\n")
    print(machine(docker) + "\n")
    print("\n\n".join(snippet(m, args.target) for m in found))
    missed = [m for m in found if m.flavor in TIMED and m.wall >= args.target]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
