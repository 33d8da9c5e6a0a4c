"""`torchyard inspect IMAGE`: what is inside an image, and whether it runs on a driver / GPU / this machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from builder.cli.lookup_view import image_ref
from builder.cli.options import DRIVER_HELP, HOST, here_option, image_reference, matrix_of, query_here
from builder.cli.output import emit_json
from builder.host.doctor import no_gpu
from builder.host.image_inspect import ImageFacts, Remote, combination_of, judge, read_facts
from builder.matrix.model import Matrix
from builder.resolve.choose import choose_result
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery
from builder.resolve.report import min_driver
from builder.resolve.rules import Check
from builder.resolve.verdict import Answer, Verdict, check_json, status_words, verdict

SCHEMA = 2  # 2: checks carry `status`; `runs` is null when it cannot tell; `verdict`


@dataclass(frozen=True)
class InspectRequest:
    """inspect's flags, typed: the image, the machine asked about, and how to read an image not held here."""

    image: str
    raw: RawQuery
    here: bool
    as_json: bool
    pull: bool

    @classmethod
    def of(cls, image: str, flags: dict[str, Any]) -> InspectRequest:
        raw = RawQuery(
            driver=flags["driver"], archs=flags["archs"], gpus=flags["gpu_names"], platform=flags["platform"]
        )
        return cls(image, raw, flags["here"], flags["as_json"], flags["pull"])


@click.command("inspect")
@click.argument("image", callback=image_reference)
@click.option("--driver", metavar="V", help=DRIVER_HELP)
@click.option("--arch", "archs", metavar="ARCH", multiple=True, help="GPU architecture (repeatable).")
@click.option("--gpu", "gpu_names", metavar="NAME", multiple=True, help='GPU name: "RTX 4090" (repeatable).')
@click.option(
    "--platform",
    metavar="linux/amd64|linux/arm64",
    help="Platform of the machine (and of the image read from a registry).",
)
@here_option
@click.option(
    "--pull", is_flag=True, help="An image not in the engine: pull it and probe it (default: read its registry config)."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/schemas.md).")
@click.pass_context
def inspect_cmd(ctx: click.Context, /, image: str, **flags: Any) -> None:
    """What IMAGE holds (any image with torch) and whether it runs on the driver / GPU given, or here."""
    from builder.engine import DockerEngine

    req = InspectRequest.of(image, flags)
    m = matrix_of(ctx)
    q = query_here(m, req.raw, here=req.here)
    engine = DockerEngine()
    engine.info()
    facts = read_facts(engine, req.image, Remote(platform=q.platform.value, pull=req.pull))
    asked = q.driver is not None or bool(q.archs) or q.platform_given or req.here
    cpu = req.here and no_gpu(ctx.meta[HOST])  # a machine without a GPU: RUNS ON CPU, the GPU rules not applicable
    checks = judge(m, facts, q, cpu_host=cpu) if asked else []
    runs = verdict(checks, here=req.here) if asked else None
    c = combination_of(m, facts)
    if req.as_json:
        emit_json(as_data(facts, c, q, checks, runs))
    else:
        click.echo(as_text(facts, c, q, checks, runs) + next_step(m, q, runs, c))
    if runs is not None and runs.exit_code:
        raise SystemExit(runs.exit_code)


def next_step(m: Matrix, q: Query, runs: Verdict | None, c: Combination | None) -> str:
    """WILL NOT RUN: the image that would run there (lookup's first row for the same machine), or the driver."""
    if runs is None or runs.answer is not Answer.WILL_NOT_RUN:
        return ""
    best = choose_result(m, q)
    if best is not None:
        return f"\nnext: an image that runs there: {image_ref(m, best)} ({best.combo.id}; torchyard build ... makes it)"
    floor = min_driver(Facts(m), c) if c is not None else None
    return f"\nnext: install a driver >= {floor}" if floor else ""


def _question(q: Query) -> str:
    parts = [f"driver {q.driver.describe()}" if q.driver else ""]
    parts.append(", ".join(g.name for g in q.gpus) or " ".join(a.name for a in q.archs))
    parts.append(q.platform.value if q.platform_given else "")
    return " on ".join(p for p in parts if p) or "any machine"


def as_data(
    facts: ImageFacts, c: Combination | None, q: Query, checks: list[Check], runs: Verdict | None
) -> dict[str, Any]:
    sass, ptx = _code(facts, c)
    combination = c.id if c else None
    return {
        "schema": SCHEMA,
        "image": facts.image,
        "platform": facts.platform,
        "read_from": facts.source,
        "combination": facts.combination or combination,
        "torch": facts.torch,
        "cuda": facts.cuda,
        "cudnn": facts.cudnn,
        "nccl": facts.nccl,
        "python": facts.python,
        "os": facts.os,
        "sass": sass,
        "ptx": ptx,
        "unread": facts.unread,
        "nvidia_require_cuda": facts.require_cuda,
        "question": _question(q) if runs is not None else None,
        "runs": {Answer.RUNS: True, Answer.RUNS_ON_CPU: True, Answer.WILL_NOT_RUN: False}.get(runs.answer)
        if runs
        else None,
        "verdict": runs.answer.value if runs else None,
        "conditions": list(runs.conditions) if runs else [],
        "to_tell": list(runs.unknown) if runs else [],
        "checks": [check_json(c) for c in checks],
    }


def _code(facts: ImageFacts, c: Combination | None) -> tuple[list[str] | None, list[str]]:
    """The compiled architectures: what the probe read, else the matrix's for the image's combination."""
    if facts.sass is not None:
        return list(facts.sass), list(facts.ptx)
    if c is not None and c.sass is not None:
        return [a.name for a in c.sass], [a.name for a in c.ptx]
    return None, []


def as_text(facts: ImageFacts, c: Combination | None, q: Query, checks: list[Check], runs: Verdict | None) -> str:
    stack = ", ".join(
        part
        for part in (
            f"torch {facts.torch}" if facts.torch else "no torch found",
            f"CUDA {facts.cuda}" if facts.cuda else "",
            f"cuDNN {facts.cudnn}" if facts.cudnn else "",
            f"NCCL {facts.nccl}" if facts.nccl else "",
            f"Python {facts.python}" if facts.python else "",
            facts.os or "",
        )
        if part
    )
    lines = [f"{facts.image} ({facts.platform}; read from {facts.source})", f"  {stack}"]
    sass, ptx = _code(facts, c)
    if sass is not None:
        lines.append(f"  GPU code: {' '.join(sass) or 'none'}; PTX: {' '.join(ptx) or 'none'}")
    elif facts.unread:
        lines.append(f"  not read: {facts.unread}")
    lines.append(f"  NVIDIA_REQUIRE_CUDA: {facts.require_cuda or 'not set'}")
    if runs is None:
        lines.append("  (ask whether it runs somewhere: --driver, --gpu / --arch, --platform, or --here)")
        return "\n".join(lines)
    lines.append(f"{_question(q)}: {runs.words}")
    lines += [f"  {status_words(c):<11}  {c.rule:<16} {c.reason}" for c in checks]
    lines += [f"  to tell: {line}" for line in runs.unknown]
    return "\n".join(lines)
