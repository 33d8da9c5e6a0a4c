"""Command line of the smoke suite (argparse: it runs where only the standard library and torch are)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from . import report
from .expect import load
from .framework import FAIL, Context
from .manifest import STACK_KEYS
from .runner import load_checks, run_all, unknown_prefix, worker

DEFAULT_MANIFEST = "/etc/torchyard/manifest.json"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="smoke", description="torchyard smoke suite: does this image work on this GPU?")
    p.add_argument("--expect", metavar="MANIFEST", help=f"expected versions (default: {DEFAULT_MANIFEST} if present)")
    p.add_argument("--arch", help="target GPU architecture, e.g. sm_89 (default: what the image was built for)")
    p.add_argument("--require-gpu", action="store_true", help="fail, rather than skip, the GPU checks without a GPU")
    p.add_argument("--json", metavar="FILE", help="write results as JSON")
    p.add_argument("--junit", metavar="FILE", help="write results as JUnit XML")
    p.add_argument("--only", metavar="PREFIX", action="append", default=[], help="run checks starting with PREFIX")
    p.add_argument("--no-gpu-checks", action="store_true", help="leave the GPU checks out entirely")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every check's timeout")
    p.add_argument("--small", action="store_true", help="smaller problems (simulated/emulated devices)")
    p.add_argument("--accept", metavar="FILE", help="the hygiene checks' accepted exceptions (JSON: check -> list)")
    for key in STACK_KEYS:
        p.add_argument(f"--expect-{key}", metavar="VERSION", help=f"expected {key} (overrides the manifest)")
    return p


# Helper processes some checks start (`python <smoke dir> --smoke-helper NAME CONFIG`): module, function.
HELPERS = {
    "ddp-rank": ("ddp_rank", "main"),
    "determinism": ("checks_determinism", "run_child"),
    "uid-probe": ("uid_probe", "main"),  # hygiene.uid, started by the host as another user (builder/pipeline)
}


def helper(name: str, config: str) -> int:
    module, function = HELPERS[name]
    found: int = getattr(importlib.import_module(f".{module}", __package__), function)(json.loads(config))
    return found


def _check_prefixes(prefixes: list[str]) -> None:
    """Refused as `torchyard smoke --only` refuses it (builder/smoke/runner.py: unknown_prefix)."""
    bad = unknown_prefix(prefixes)
    if bad is not None:
        parser().error(f"--only {bad!r}: no check's name starts with it")


def _accepted(path: str | None) -> dict[str, list[str]]:
    if path is None:
        return {}
    with open(path, encoding="utf-8") as handle:
        found = json.load(handle)
    return {str(key): [str(item) for item in items] for key, items in dict(found).items()}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--smoke-helper"]:
        return helper(argv[1], argv[2])
    if argv[:1] == ["--worker"]:
        protocol = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # stray prints from checks go to stderr, never into the protocol
        worker(json.loads(argv[1]), protocol)
        return 0
    args = parser().parse_args(argv)
    _check_prefixes(args.only)
    manifest = args.expect or (DEFAULT_MANIFEST if os.path.exists(DEFAULT_MANIFEST) else None)
    overrides = {key: getattr(args, f"expect_{key}") for key in STACK_KEYS}
    ctx = Context(
        expect=load(manifest, overrides),
        arch=args.arch,
        require_gpu=args.require_gpu,
        small=args.small,
        timeout_scale=args.timeout_scale,
        accepted=_accepted(args.accept),
    )
    checks = [c for c in load_checks() if not (args.no_gpu_checks and c.gpu)]
    if args.only:
        checks = [c for c in checks if c.name.startswith(tuple(args.only))]
    start = time.perf_counter()
    results = run_all(checks, ctx, args.timeout_scale)
    seconds = time.perf_counter() - start
    print(report.table(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report.as_json(results, ctx, seconds), handle, indent=2)
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as handle:
            handle.write(report.as_junit(results, seconds))
    sys.stdout.flush()
    return 1 if any(r.status == FAIL for r in results) else 0
