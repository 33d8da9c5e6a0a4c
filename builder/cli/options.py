"""Flags shared by every command that selects a combination (lookup, explain, render, build)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from builder.core import env
from builder.core.errors import UsageError
from builder.matrix import Matrix, load_matrix
from builder.resolve.query import Query, RawQuery, parse_query

F = TypeVar("F", bound=Callable[..., Any])

DRIVER_HELP = (
    "NVIDIA driver: 550.54.15 (nvidia-smi --query-gpu=driver_version --format=csv,noheader), or a branch: 535; not "
    'the "CUDA Version" of nvidia-smi\'s header.'
)
_COMBINATION_OPTIONS = (
    click.option("--driver", metavar="V", help=DRIVER_HELP),
    click.option(
        "--arch",
        "archs",
        metavar="ARCH",
        multiple=True,
        help="GPU architecture: sm_89, 8.9, sm_90a. Repeatable: the image must run on all of them.",
    ),
    click.option(
        "--gpu",
        "gpu_names",
        metavar="NAME",
        multiple=True,
        help='GPU name: "RTX 4090", "H100", "DGX Spark", as nvidia-smi prints it. Repeatable.',
    ),
    click.option(
        "--platform",
        metavar="linux/amd64|linux/arm64",
        help="Platform of the image (default: the GPU's host where it has one, else this machine's).",
    ),
    click.option(
        "--torch",
        "torch_spec",
        metavar="SPEC",
        help="torch version or range: 2.5, 2.5.1, '>=2.4,<2.7'; as torch.__version__ prints it, 2.5.1+cu124 is "
        "--torch 2.5.1 --variant cu124.",
    ),
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


_INFERENCE_OPTIONS = (
    click.option(
        "--inference",
        is_flag=True,
        help="About the inference image: also the rule that an ONNX Runtime release fits (docs/rules.md).",
    ),
    click.option(
        "--onnxruntime",
        metavar="VERSION",
        help="This ONNX Runtime release (onnxruntime-gpu, or onnxruntime for CPU torch), checked; implies --inference.",
    ),
)


def inference_options(func: F) -> F:
    """lookup / explain: the question is about the inference image (render and build: --target inference)."""
    for option in reversed(_INFERENCE_OPTIONS):
        func = option(func)
    return func


def combination_options(func: F) -> F:
    for option in reversed(_COMBINATION_OPTIONS):
        func = option(func)
    return func


def matrix_of(ctx: click.Context, *, publish_set: bool = False) -> Matrix:
    """The matrix of --matrix; `publish_set`: with the publish set of --publish-set / publish.toml, which only the
    commands that plan it (those with publish_set_option) read."""
    root = ctx.find_root().obj or {}
    return load_matrix(root.get("matrix"), root.get("publish_set"), facts_only=not publish_set)


def _remember_publish_set(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    root = ctx.find_root()
    if value is not None and isinstance(root.obj, dict):
        root.obj["publish_set"] = value  # matrix_of reads it, as it reads --matrix


publish_set_option = click.option(
    "--publish-set",
    metavar="FILE",
    envvar=env.PUBLISH_SET,
    expose_value=False,
    callback=_remember_publish_set,
    help=f"The publish set's file ([[publish]] entries, [ci] table; env {env.PUBLISH_SET}; default: publish.toml "
    "beside the matrix, else the matrix's own entries).",
)


def publish_note(m: Matrix) -> None:
    """One line on stderr when a publish file set matrix.toml's own [[publish]] entries aside."""
    if m.publish_note:
        click.echo(f"note: {m.publish_note}", err=True)


def raw_query_of(kwargs: dict[str, Any]) -> RawQuery:
    """Pop the combination flags out of a command's kwargs."""
    return RawQuery(
        driver=kwargs.pop("driver"),
        archs=tuple(kwargs.pop("archs")),
        gpus=tuple(kwargs.pop("gpu_names")),
        platform=kwargs.pop("platform"),
        torch=kwargs.pop("torch_spec"),
        cuda=kwargs.pop("cuda_spec"),
        python=kwargs.pop("python_spec"),
        os=kwargs.pop("os_name"),
        variant=kwargs.pop("variant"),
        forward_compat=kwargs.pop("forward_compat"),
        inference=bool(kwargs.pop("inference", False)),
        onnxruntime=kwargs.pop("onnxruntime", None),
    )


def query_of(m: Matrix, kwargs: dict[str, Any], *, here: bool = False) -> Query:
    return query_here(m, raw_query_of(kwargs), here=here)


HOST = "torchyard.host"  # ctx.meta: the machine --here read (builder.host.probe.Host)


def query_here(m: Matrix, raw: RawQuery, *, here: bool) -> Query:
    """The query the flags ask; with `here`, what they leave open comes from this machine (host_query, the
    chooser doctor uses: a CPU image where no GPU can be used), said in lines on stderr."""
    if not here:
        return parse_query(m, raw)
    from builder.host.choose import host_query
    from builder.host.probe import probe

    host = probe(m)
    click.get_current_context().meta[HOST] = host  # lookup --here's locator judges images for the same machine
    hq = host_query(m, host, raw)
    click.echo(f"torchyard: this machine: {host.describe()}", err=True)
    for note in hq.notes:
        click.echo(f"torchyard: {note}", err=True)
    if hq.failing is not None:
        click.echo(f"torchyard: the driver is installed but fails ({hq.failing}): GPU images: CANNOT TELL", err=True)
    elif not hq.gpu and hq.query.variant == "cpu":
        click.echo("torchyard: no GPU the driver can use: answering with CPU images (as doctor does)", err=True)
    return hq.query


def repository(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A --repo-like flag, checked by Docker's reference grammar before anything else runs."""
    from builder.core.names import check_repository

    return None if value is None else check_repository(value, f"--{(param.name or '').replace('_', '-')}")


def folder(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An output folder flag: an empty value is a mistake, not "the current folder"."""
    if value is not None and not value.strip():
        flag = max(param.opts, key=len) if param.opts else "-o"
        raise UsageError(f"{flag}: empty; give a folder")
    return value


def image_reference(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from builder.core.names import check_reference

    return check_reference(value, "IMAGE")


here_option = click.option(
    "--here", is_flag=True, help="Fill in what the flags leave open (driver, GPUs, platform) from this machine."
)
any_host_option = click.option(
    "--any-host",
    is_flag=True,
    envvar=env.ANY_HOST,
    help=f"Choose for any machine: do not read this one's driver and GPUs (${env.ANY_HOST}=1).",
)
