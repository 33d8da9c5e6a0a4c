"""`torchyard inspect IMAGE`: what is inside an image, and whether it runs on a driver / GPU / this machine."""

from __future__ import annotations

from typing import Any

import click

from builder.cli.options import here_option, image_reference, matrix_of, query_here
from builder.cli.output import emit_json
from builder.host.image_inspect import ImageFacts, combination_of, judge, read_facts
from builder.resolve.query import Query, RawQuery
from builder.resolve.rules import Check
from builder.resolve.verdict import Answer, Verdict, check_json, status_words, verdict

SCHEMA = 2  # 2: checks carry `status`; `runs` is null when it cannot tell; `verdict`


@click.command("inspect")
@click.argument("image", callback=image_reference)
@click.option("--driver", metavar="V", help="NVIDIA driver: 550.54.15, or a branch: 535.")
@click.option("--arch", "archs", metavar="ARCH", multiple=True, help="GPU architecture (repeatable).")
@click.option("--gpu", "gpu_names", metavar="NAME", multiple=True, help='GPU name: "RTX 4090" (repeatable).')
@click.option("--platform", metavar="linux/amd64|linux/arm64", help="Platform of the machine.")
@here_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (docs/schemas.md).")
@click.pass_context
def inspect_cmd(
    ctx: click.Context,
    /,
    image: str,
    driver: str | None,
    archs: tuple[str, ...],
    gpu_names: tuple[str, ...],
    platform: str | None,
    here: bool,
    as_json: bool,
) -> None:
    """What IMAGE holds (any image with torch) and whether it runs on the driver / GPU given, or here."""
    from builder.engine import DockerEngine

    m = matrix_of(ctx)
    raw = RawQuery(driver=driver, archs=archs, gpus=gpu_names, platform=platform)
    q = query_here(m, raw, here=here)
    engine = DockerEngine()
    engine.info()
    facts = read_facts(engine, image)
    asked = q.driver is not None or bool(q.archs) or q.platform_given
    checks = judge(m, facts, q) if asked else []
    runs = verdict(checks, here=here) if asked else None
    if as_json:
        c = combination_of(m, facts)
        emit_json(as_data(facts, c.id if c else None, q, checks, runs))
    else:
        click.echo(as_text(facts, q, checks, runs))
    if runs is not None and runs.exit_code:
        raise SystemExit(runs.exit_code)


def _question(q: Query) -> str:
    parts = [f"driver {q.driver.describe()}" if q.driver else ""]
    parts.append(", ".join(g.name for g in q.gpus) or " ".join(a.name for a in q.archs))
    parts.append(q.platform.value if q.platform_given else "")
    return " on ".join(p for p in parts if p) or "any machine"


def as_data(
    facts: ImageFacts, combination: str | None, q: Query, checks: list[Check], runs: Verdict | None
) -> dict[str, Any]:
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
        "sass": list(facts.sass) if facts.sass is not None else None,
        "ptx": list(facts.ptx),
        "nvidia_require_cuda": facts.require_cuda,
        "question": _question(q) if runs is not None else None,
        "runs": {Answer.RUNS: True, Answer.WILL_NOT_RUN: False}.get(runs.answer) if runs else None,
        "verdict": runs.answer.value if runs else None,
        "conditions": list(runs.conditions) if runs else [],
        "to_tell": list(runs.unknown) if runs else [],
        "checks": [check_json(c) for c in checks],
    }


def as_text(facts: ImageFacts, q: Query, checks: list[Check], runs: Verdict | None) -> str:
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
    if facts.sass is not None:
        lines.append(f"  GPU code: {' '.join(facts.sass) or 'none'}; PTX: {' '.join(facts.ptx) or 'none'}")
    lines.append(f"  NVIDIA_REQUIRE_CUDA: {facts.require_cuda or 'not set'}")
    if runs is None:
        lines.append("  (ask whether it runs somewhere: --driver, --gpu / --arch, --platform, or --here)")
        return "\n".join(lines)
    lines.append(f"{_question(q)}: {runs.words}")
    lines += [f"  {status_words(c):<11}  {c.rule:<16} {c.reason}" for c in checks]
    lines += [f"  to tell: {line}" for line in runs.unknown]
    return "\n".join(lines)
