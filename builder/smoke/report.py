"""The suite's outputs: a summary table, JSON and JUnit XML."""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict
from typing import Any
from xml.etree import ElementTree

from .framework import FAIL, PASS, SKIP, Context, Result


def summary(results: list[Result]) -> dict[str, int]:
    return {status: sum(r.status == status for r in results) for status in (PASS, FAIL, SKIP)}


def as_json(results: list[Result], ctx: Context, seconds: float) -> dict[str, Any]:
    return {
        "suite": "torchyard-smoke",
        "schema": 1,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "expectations": ctx.expect.source,
        "arch": ctx.arch,
        "require_gpu": ctx.require_gpu,
        "small": ctx.small,
        "seconds": round(seconds, 2),
        "summary": summary(results),
        "observed": ctx.observed,
        "checks": [dict(asdict(r), seconds=round(r.seconds, 3)) for r in results],
    }


def as_junit(results: list[Result], seconds: float) -> str:
    counts = summary(results)
    suite = ElementTree.Element(
        "testsuite",
        name="torchyard-smoke",
        tests=str(len(results)),
        failures=str(counts[FAIL]),
        skipped=str(counts[SKIP]),
        time=f"{seconds:.3f}",
    )
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname="smoke", name=r.name, time=f"{r.seconds:.3f}")
        if r.status == FAIL:
            ElementTree.SubElement(case, "failure", message=r.message).text = r.message
        elif r.status == SKIP:
            ElementTree.SubElement(case, "skipped", message=r.message)
        else:
            ElementTree.SubElement(case, "system-out").text = r.message
    return ElementTree.tostring(suite, encoding="unicode") + "\n"


def table(results: list[Result]) -> str:
    width = max((len(r.name) for r in results), default=10)
    lines = [f"{'CHECK':<{width}}  {'RESULT':<7}  {'TIME':>7}  MESSAGE"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.status.upper():<7}  {r.seconds:6.1f}s  {r.message}")
    counts = summary(results)
    lines.append(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines)
