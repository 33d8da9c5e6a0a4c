"""What render and build share: their options and the prologue that reads the flags (and this machine, unless
--any-host) and chooses the plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import click

from builder.cli.image_options import image_options, render_options_of
from builder.cli.options import any_host_option, combination_options, folder, matrix_of, raw_query_of, repository
from builder.core.kinds import Platform, Target, parse_choice, parse_platform
from builder.matrix.model import Matrix
from builder.pipeline.request import Chosen, choose_plan, choose_plans
from builder.render.options import RenderOptions
from builder.render.tensorrt import check_tensorrt
from builder.resolve.facts import Facts
from builder.resolve.query import parse_query
from builder.resolve.report import min_driver

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_REPO = "torchyard"

_SHARED = (
    click.option(
        "--target",
        default=Target.RUNTIME.value,
        show_default=True,
        metavar="|".join(t.value for t in Target),
        help="Image(s): runtime, devel, inference (runtime + ONNX Runtime), or all the combination can have.",
    ),
    click.option(
        "--repo",
        default=DEFAULT_REPO,
        show_default=True,
        metavar="REGISTRY/NAME",
        callback=repository,
        help="Image repository.",
    ),
    click.option(
        "-o",
        "--output",
        "output",
        metavar="DIR",
        callback=folder,
        help="Context, plan and logs (default: build/torchyard/<id>).",
    ),
    click.option("--force", is_flag=True, help="Write into a non-empty folder torchyard did not write."),
    click.option("--tensorrt", is_flag=True, help="TensorRT in the inference image (needs --nvidia-index-url)."),
    click.option(
        "--nvidia-index-url",
        metavar="URL",
        help="NVIDIA's package index, where TensorRT's PyPI stubs download from (https://pypi.nvidia.com).",
    ),
)


def image_command_options(func: F) -> F:
    """Every option render and build share, in help order."""
    for option in reversed(_SHARED):
        func = option(func)
    return combination_options(image_options(any_host_option(func)))


def prepare(ctx: click.Context, kwargs: dict[str, Any], target: str) -> tuple[Matrix, RenderOptions, Chosen]:
    """Flags -> options, query (this machine fills what they leave open, unless --any-host) -> the plan."""
    m = matrix_of(ctx)
    wanted = parse_choice(Target, target, "--target")
    tensorrt = (bool(kwargs.pop("tensorrt", False)), bool(kwargs.pop("nvidia_index_url", None)))
    check_tensorrt(m, *tensorrt, wanted.flavors())  # refused before anything is read or chosen
    options = render_options_of(m, kwargs["archs"], kwargs)
    any_host = bool(kwargs.pop("any_host"))
    raw = raw_query_of(kwargs)
    if wanted is Target.INFERENCE:  # only combinations that can have it (the rule onnxruntime)
        raw = replace(raw, inference=True)
    probed = False
    platforms = _platforms(raw.platform)
    if len(platforms) > 1:
        raw = replace(raw, platform=platforms[0].value)
    query = parse_query(m, raw)
    if not any_host:
        from builder.host.choose import host_query
        from builder.host.probe import probe

        host = probe(m)
        # the chooser doctor and lookup --here use; without a GPU, build and render keep their choice for any
        # machine (the CUDA build PyPI installs by default) and say the driver it needs
        hq = host_query(m, host, raw, cpu_without_gpu=False)
        _say(f"this machine: {host.describe()} (--any-host to choose for any machine)", *hq.notes)
        probed, query = host.driver is None, hq.query
    if len(platforms) > 1:
        chosen = choose_plans(m, query, options, wanted, platforms)
    else:
        chosen = choose_plan(m, query, options, wanted)
    _say(*chosen.notes, *filter(None, [check_tensorrt(m, *tensorrt, chosen.flavors), _cannot_tell(chosen)]))
    if probed and raw.driver is None:
        c = chosen.choice.result.combo
        floor = min_driver(Facts(m), c)
        if floor:
            _say(f"no NVIDIA driver here: {c.local_version} needs driver >= {floor} (for an older one: --driver 535)")
    return m, options, chosen


def _cannot_tell(chosen: Chosen) -> str | None:
    """The chosen combination ranked with those a fact is missing for (lookup's `*` rows): say it, with what."""
    r = chosen.choice.result
    reasons = "; ".join(dict.fromkeys(c.reason for c in r.unrecorded))
    return f"cannot tell whether {r.combo.id} runs there: {reasons}" if reasons else None


def _platforms(text: str | None) -> tuple[Platform, ...]:
    """--platform linux/amd64,linux/arm64: every platform once, in the order given (one: the usual build)."""
    if text is None or "," not in text:
        return ()
    return tuple(dict.fromkeys(parse_platform(part) for part in text.split(",")))


def _say(*lines: str) -> None:
    for line in lines:
        click.echo(f"torchyard: {line}", err=True)
