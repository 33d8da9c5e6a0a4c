"""What render and build share: their options and the prologue that reads the flags (and this machine, unless
--any-host) and chooses the plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.cli.image_options import image_options, render_options_of
from builder.cli.options import any_host_option, combination_options, folder, matrix_of, raw_query_of, repository
from builder.cli.project_flags import (
    confirm,
    project_flags_in,
    project_locked,
    project_of,
    project_options,
    project_question,
    project_render_options,
    re_resolve_option,
)
from builder.core.kinds import Platform, Target, parse_choice, parse_platform
from builder.matrix.model import Matrix
from builder.pipeline.request import Chosen, choose_plan, choose_plans
from builder.project.image import base_options, project_plan
from builder.project.settle import Project
from builder.render.options import RenderOptions
from builder.render.tensorrt import check_tensorrt
from builder.resolve.combos import Combination
from builder.resolve.facts import Facts
from builder.resolve.query import Query, RawQuery, parse_query
from builder.resolve.report import min_driver

if TYPE_CHECKING:
    from builder.host.probe import Host

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_REPO = "torchyard"

_SHARED = (
    click.option(
        "--target",
        default=Target.RUNTIME.value,
        show_default=True,
        metavar="|".join(t.value for t in Target),
        help=(
            "Image(s): runtime, devel, inference (runtime + ONNX Runtime), notebook (runtime + JupyterLab), or all "
            "the combination can have (all: every one but notebook)."
        ),
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
    return combination_options(image_options(any_host_option(project_options(re_resolve_option(func)))))


def prepare(
    ctx: click.Context, kwargs: dict[str, Any], target: str, *, dry_run: bool = False
) -> tuple[Matrix, RenderOptions, Chosen]:
    """Flags (and the project's torchyard.toml and lock) -> options, query (this machine fills what they leave
    open, unless --any-host or a lock decides) -> the plan. `dry_run`: a project's new lock is not written."""
    m = matrix_of(ctx)
    project = project_of(m, kwargs.pop("project"), kwargs.pop("no_project"), re_resolve=kwargs.pop("re_resolve"))
    target = target if project is None else project_flags_in(ctx, project, kwargs, target)
    wanted = parse_choice(Target, target, "--target")
    tensorrt = (bool(kwargs.pop("tensorrt", False)), bool(kwargs.pop("nvidia_index_url", None)))
    check_tensorrt(m, *tensorrt, wanted.flavors())  # refused before anything is read or chosen
    options = render_options_of(m, kwargs["archs"], kwargs)
    any_host = bool(kwargs.pop("any_host"))
    raw = flags = raw_query_of(kwargs)
    if project is not None:
        options = project_render_options(m, project, options)
        raw, any_host = project_question(m, project, flags, any_host)
    deps, options = options, options if project is None else base_options(options)  # deps: the project's layer
    if wanted is Target.INFERENCE:  # only combinations that can have it (the rule onnxruntime)
        raw = replace(raw, inference=True)
    platforms = _platforms(raw.platform)
    if len(platforms) > 1:
        raw = replace(raw, platform=platforms[0].value)
    query, host = parse_query(m, raw), None
    if not any_host:
        query, host = _this_machine(m, raw)
    if len(platforms) > 1:
        chosen = choose_plans(m, query, options, wanted, platforms)
    else:
        chosen = choose_plan(m, query, options, wanted)
    _say(*chosen.notes, *filter(None, [check_tensorrt(m, *tensorrt, chosen.flavors), _cannot_tell(chosen)]))
    c = chosen.choice.result.combo
    if project is not None:
        confirm(m, project, flags, c)
        machine = host.describe() if host else "any machine (--any-host)"
        _say(*project_locked(m, project, c, machine, options.strategy, write=not dry_run))
        chosen = _with_project(chosen, project, deps)
    if host is not None and host.driver is None and raw.driver is None:
        _say(*_no_driver(m, c))
    return m, options, chosen


def _with_project(chosen: Chosen, project: Project, deps: RenderOptions) -> Chosen:
    """The project's image over the chosen plan's first flavor; `deps`: the options with its dependencies."""
    return replace(chosen, project=project_plan(project.config, chosen.plan, chosen.flavors[0], deps))


def _this_machine(m: Matrix, raw: RawQuery) -> tuple[Query, Host]:
    """The question with this machine's answers where the flags leave it open, and the machine."""
    from builder.host.choose import host_query
    from builder.host.probe import probe

    host = probe(m)
    # the chooser doctor and lookup --here use; without a GPU, build and render keep their choice for any
    # machine (the CUDA build PyPI installs by default) and say the driver it needs
    hq = host_query(m, host, raw, cpu_without_gpu=False)
    _say(f"this machine: {host.describe()} (--any-host to choose for any machine)", *hq.notes)
    return hq.query, host


def _no_driver(m: Matrix, c: Combination) -> list[str]:
    floor = min_driver(Facts(m), c)
    return [f"no NVIDIA driver here: {c.local_version} needs driver >= {floor} (for an older one: --driver 535)"] \
        if floor else []  # fmt: skip


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
