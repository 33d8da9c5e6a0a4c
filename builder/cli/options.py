"""Flags shared by every command that selects a combination (lookup, explain, render, build)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from builder.matrix import Matrix, load_matrix
from builder.resolve.query import Query, RawQuery, parse_query

F = TypeVar("F", bound=Callable[..., Any])

_ARCH_HELP = "GPU architecture: sm_89, 8.9, sm_90a."
_COMBINATION_OPTIONS = (
    click.option("--driver", metavar="V", help="NVIDIA driver (nvidia-smi): 550.54.15, or a branch: 535."),
    click.option("--arch", metavar="ARCH", help=_ARCH_HELP),
    click.option("--gpu", metavar="NAME", help='GPU name: "RTX 4090", "H100", "Tesla T4".'),
    click.option("--torch", "torch_spec", metavar="SPEC", help="torch version or range: 2.5, 2.5.1, '>=2.4,<2.7'."),
    click.option("--cuda", "cuda_spec", metavar="SPEC", help="CUDA of the wheel: 12, 12.4, cu124, '>=12.4'."),
    click.option("--python", "python_spec", metavar="SPEC", help="Python: 3.11, '>=3.10'."),
    click.option("--os", "os_name", metavar="NAME", help="OS base: debian12, ubuntu22.04, ubuntu24.04 ..."),
    click.option("--variant", metavar="cuXYZ|cpu", help="Wheel variant: cu124, cu130, cpu."),
    click.option(
        "--forward-compat",
        is_flag=True,
        help="Allow CUDA forward compatibility (data-center and Jetson GPUs, cuda-compat package).",
    ),
)


def combination_options(func: F) -> F:
    for option in reversed(_COMBINATION_OPTIONS):
        func = option(func)
    return func


def combination_options_multi_arch(func: F) -> F:
    """As combination_options, with a repeatable --arch (render/build compile for every one given)."""
    multi = click.option("--arch", "archs", metavar="ARCH", multiple=True, help=_ARCH_HELP + " Repeatable.")
    for option in reversed((_COMBINATION_OPTIONS[0], multi, *_COMBINATION_OPTIONS[2:])):
        func = option(func)
    return func


def matrix_of(ctx: click.Context) -> Matrix:
    path = (ctx.find_root().obj or {}).get("matrix")
    return load_matrix(path)


def query_of(m: Matrix, kwargs: dict[str, Any]) -> Query:
    return parse_query(
        m,
        RawQuery(
            driver=kwargs.pop("driver"),
            arch=kwargs.pop("arch"),
            gpu=kwargs.pop("gpu"),
            torch=kwargs.pop("torch_spec"),
            cuda=kwargs.pop("cuda_spec"),
            python=kwargs.pop("python_spec"),
            os=kwargs.pop("os_name"),
            variant=kwargs.pop("variant"),
            forward_compat=kwargs.pop("forward_compat"),
        ),
    )
