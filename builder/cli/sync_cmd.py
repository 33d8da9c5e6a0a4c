"""`torchyard matrix sync`: the matrix.toml entries upstream can source for a torch release, the new releases of an
NVIDIA library wheel, or an ONNX Runtime release; printed, or inserted with --write once the whole file passes
`matrix check`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builder.cli.options import matrix_of
from builder.cli.request import takes
from builder.cli.upstream_cmd import clients, upstream_options
from builder.core.errors import UsageError
from builder.core.versions import parse_release, release_of_build
from builder.matrix.model import Matrix

if TYPE_CHECKING:  # upstream's modules are imported where the command runs: --help stays fast
    from builder.upstream.sync_run import Outcome

_KINDS = ("--torch", "--nvidia-wheel", "--onnxruntime")


@dataclass(frozen=True, kw_only=True)
class SyncFlags:
    torch_version: str | None
    nvidia_wheel: str | None
    onnxruntime: str | None
    package: str | None
    wheel_dir: str | None
    write: bool
    pypi_url: str | None
    pytorch_index_url: str | None
    shared: Mapping[str, Any]

    def __post_init__(self) -> None:
        given = [k for k, v in zip(_KINDS, (self.torch_version, self.nvidia_wheel, self.onnxruntime), strict=True) if v]
        if len(given) != 1:
            said = f" (given: {' and '.join(given)})" if given else ""
            raise UsageError(f"matrix sync takes exactly one of {', '.join(_KINDS)}{said}")
        if (self.package or self.wheel_dir) and not self.onnxruntime:
            raise UsageError("--package and --wheel-dir go with --onnxruntime")


@click.command("sync")
@click.option("--torch", "torch_version", metavar="VERSION", help="A torch release to add (2.16.0).")
@click.option("--nvidia-wheel", metavar="PACKAGE", help="nvidia-cudnn-cu13 or nvidia-nccl-cu13: its newer releases.")
@click.option("--onnxruntime", metavar="VERSION", help="An ONNX Runtime release to add (1.32.0).")
@click.option(
    "--package",
    type=click.Choice(["onnxruntime-gpu", "onnxruntime"]),
    help="With --onnxruntime: which package (default onnxruntime-gpu).",
)
@click.option(
    "--wheel-dir",
    type=click.Path(exists=True, file_okay=False),
    help="With --onnxruntime: read the wheels from DIR (as PyPI lists them) instead of downloading them.",
)
@click.option("--write", is_flag=True, help="Insert the entries into the matrix file (else print them).")
@upstream_options(registries=False)
@click.pass_context
@takes(SyncFlags)
def sync_cmd(ctx: click.Context, flags: SyncFlags) -> None:
    """Read upstream and print (or, with --write, insert) the matrix.toml entries it can source. --torch X: a torch
    release (Pythons and platform wheels, the PyPI default variant and its pins, torchvision / torchaudio, CUDA
    releases the pins name). --nvidia-wheel PACKAGE: each release newer than the newest recorded, with its wheels'
    platform tags. --onnxruntime X: an [[onnxruntime]] entry (Pythons, platforms, CUDA / cuDNN majors) and, for
    onnxruntime-gpu, the GPU code of its CUDA provider read from one wheel per platform (downloaded to a temporary
    folder, a few hundred MB each, or read from --wheel-dir). What upstream cannot tell is marked "not recorded"
    with where to find it. The result passes `matrix check`; review the diff."""
    m = matrix_of(ctx)
    path = Path(m.path)
    if flags.write:
        _writable(path)
    outcome = _sync(m, flags)
    if outcome.refused or outcome.updated is None:
        click.echo(outcome.shown, nl=False)
        if outcome.refused:
            raise UsageError(outcome.refused)
        return
    if not flags.write:
        click.echo(outcome.shown, nl=False)
        click.echo(f"# matrix check: ok with these entries in {path} (--write inserts them)")
        return
    path.write_text(outcome.updated)
    click.echo(f"{path}: {outcome.done}")


def _sync(m: Matrix, flags: SyncFlags) -> Outcome:
    from builder.upstream.index import PYPI
    from builder.upstream.sync import PYTORCH_INDEX
    from builder.upstream.sync_run import sync_nvidia_wheel, sync_onnxruntime, sync_torch

    http, _ = clients(dict(flags.shared))
    pypi = flags.pypi_url or PYPI
    if flags.torch_version:
        version = parse_release(release_of_build(flags.torch_version, "--torch", "matrix sync"), "--torch")
        return sync_torch(m, http, version, pypi, flags.pytorch_index_url or PYTORCH_INDEX)
    if flags.nvidia_wheel:
        return sync_nvidia_wheel(m, http, flags.nvidia_wheel.strip(), pypi)
    version = parse_release(str(flags.onnxruntime), "--onnxruntime")
    wheel_dir = Path(flags.wheel_dir) if flags.wheel_dir else None
    return sync_onnxruntime(m, http, flags.package or "onnxruntime-gpu", version, pypi, wheel_dir)


def _writable(path: Path) -> None:
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise UsageError(f"{path} is not writable: sync into a matrix of your own (--matrix FILE)")
