"""Flags shared by render and build: strategy, architectures, network, extras (-> RenderOptions)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from builder.core import env
from builder.core.errors import UsageError
from builder.core.kinds import Installer, Strategy, parse_choice
from builder.core.names import check_mirror
from builder.core.redact import redact
from builder.matrix import Matrix
from builder.matrix.lock import BaseLock, lock_path, read_lock
from builder.pipeline.extension_dir import check_extension_dir
from builder.render.network import NetworkFlags, resolve_network
from builder.render.options import Extension, RenderOptions
from builder.render.reqtypes import Requirements
from builder.render.requirements import read_requirements, read_requirements_set, with_file_indexes
from builder.resolve.query import known_arch

F = TypeVar("F", bound=Callable[..., Any])
_REFRESH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _refresh_token(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if value and not _REFRESH.fullmatch(value):
        raise UsageError(
            f"--refresh / ${env.REFRESH} {value!r}: expected a short token of letters, digits, '.', '_', '-' "
            "(e.g. 2026-W48)"
        )
    return value or ""


locked_option = click.option(
    "--locked",
    is_flag=True,
    envvar=env.LOCKED,
    help=f"FROM image@digest of matrix.lock (torchyard matrix lock) instead of the tags. ${env.LOCKED}=1.",
)


def lock_of(m: Matrix, locked: bool) -> BaseLock | None:
    """matrix.lock next to the matrix, with --locked; a UsageError (exit 2) when there is none."""
    if not locked:
        return None
    found = read_lock(lock_path(m.path))
    if found is None:
        raise UsageError(f"--locked: no {lock_path(m.path)} (make it with torchyard matrix lock)")
    return found


refresh_option = click.option(
    "--refresh",
    envvar=env.REFRESH,
    metavar="TOKEN",
    callback=_refresh_token,
    help=f"A new token re-runs the OS package steps (security updates); e.g. the ISO week. ${env.REFRESH}.",
)

registry_mirror_option = click.option(
    "--registry-mirror",
    envvar=env.REGISTRY_MIRROR,
    metavar="HOST[/PATH]",
    callback=lambda ctx, param, value: None if value is None else check_mirror(value),
    help=f"FROM Docker Hub's images at this registry (a mirror): debian:X -> HOST/PATH/library/debian:X. "
    f"${env.REGISTRY_MIRROR}.",
)

_OPTIONS = (
    click.option(
        "--strategy",
        default="wheels",
        show_default=True,
        metavar="wheels|cuda-base",
        help="CUDA from torch's nvidia-* wheels on any OS base, or FROM the matching nvidia/cuda image.",
    ),
    click.option(
        "--installer",
        default=RenderOptions.installer.value,
        show_default=True,
        metavar="uv|pip",
        help="What installs the venv (uv: parallel downloads and installs; the same constraints and secrets).",
    ),
    click.option(
        "--pip",
        "extra_pip",
        multiple=True,
        metavar="REQ",
        help="Extra pip requirement, local path or git+https URL (repeatable).",
    ),
    click.option(
        "--requirements",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="pip requirements file (-r/-c includes, markers, hashes, index options; torch stays pinned), or a "
        "uv.lock / pylock.toml (installed with its hashes).",
    ),
    click.option("--user", metavar="NAME", help="Run as this non-root user (uid 1000); default: root."),
    click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Extra image label (repeatable)."),
    click.option(
        "--extension",
        "extensions",
        multiple=True,
        metavar="PATH|REQ",
        help="CUDA extension to build in devel for the --arch list and install in both images.",
    ),
    click.option(
        "--ca-bundle",
        metavar="FILE",
        help="Extra CA bundle (a BuildKit secret; default: $PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE).",
    ),
    click.option(
        "--pip-index-url", metavar="URL", help="pip index, may hold credentials (secret; default $PIP_INDEX_URL)."
    ),
    click.option(
        "--pip-extra-index-url",
        "pip_extra_index_urls",
        multiple=True,
        metavar="URL",
        help="Extra pip index (secret; default $PIP_EXTRA_INDEX_URL).",
    ),
    click.option("--apt-mirror", metavar="URL", help="Debian/Ubuntu mirror replacing the default origin."),
    click.option("--torch-index-url", metavar="URL", help="Mirror of the PyTorch wheel index for non-PyPI variants."),
    click.option("--no-host-settings", is_flag=True, help="Ignore PIP_CERT / SSL_CERT_FILE / PIP_INDEX_URL ..."),
    refresh_option,
    locked_option,
    registry_mirror_option,
)


def image_options(func: F) -> F:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def render_options_of(m: Matrix, archs: tuple[str, ...], kwargs: dict[str, Any]) -> RenderOptions:
    """Pop the image flags out of kwargs into RenderOptions (arch strings already validated by lookup)."""
    flag_index = kwargs.pop("pip_index_url")
    requirements = _read(kwargs.pop("requirements"))
    network = resolve_network(
        NetworkFlags(
            ca_bundle=kwargs.pop("ca_bundle"),
            pip_index_url=flag_index,
            pip_extra_index_urls=tuple(kwargs.pop("pip_extra_index_urls")),
            apt_mirror=kwargs.pop("apt_mirror"),
            use_host_settings=not kwargs.pop("no_host_settings"),
        )
    )
    return RenderOptions(
        strategy=parse_choice(Strategy, kwargs.pop("strategy"), "--strategy"),
        installer=parse_choice(Installer, kwargs.pop("installer"), "--installer"),
        archs=tuple(known_arch(m, a) for a in archs),
        extra_pip=tuple(kwargs.pop("extra_pip")),
        requirements=requirements,
        user=kwargs.pop("user"),
        labels=tuple(_label(text) for text in kwargs.pop("labels")),
        torch_index_url=kwargs.pop("torch_index_url"),
        extensions=tuple(_extension(text) for text in kwargs.pop("extensions")),
        network=with_file_indexes(network, requirements, flag_index),
        refresh=kwargs.pop("refresh"),
        base_lock=lock_of(m, kwargs.pop("locked")),
        registry_mirror=kwargs.pop("registry_mirror"),
    )


def _read(path: str | tuple[str, ...] | None) -> Requirements | None:
    """--requirements FILE as pip reads it (a project's several files: a tuple); `${VAR}` in its index options
    expanded from this environment."""
    if isinstance(path, tuple):
        return read_requirements_set(path, os.environ)
    return None if path is None else read_requirements(path, os.environ)


def _label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--label {text!r}: expected KEY=VALUE")
    return key, value


_PROJECT = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?", re.ASCII)


def _extension(text: str) -> Extension:
    """A directory (with setup.py / pyproject.toml) or a pip requirement. Its name goes into COPY and RUN lines,
    so it must be a plain project name (letters, digits, '.', '_', '-'): anything else is refused, not quoted."""
    if not text:
        raise UsageError("--extension: empty; give a folder with setup.py / pyproject.toml or a pip requirement")
    path = Path(text)
    if path.exists() or text.startswith((".", "/")):
        check_extension_dir(path)
        return Extension(name=_project(path.resolve().name, text), kind="path", spec=str(path.resolve()))
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        name = Requirement(text).name
    except InvalidRequirement:
        raise UsageError(f"--extension {redact(text)!r}: not a folder here, and not a pip requirement") from None
    return Extension(name=_project(name, text), kind="pip", spec=text)


def _project(name: str, given: str) -> str:
    canonical = name.replace("_", "-").lower()
    if not _PROJECT.fullmatch(canonical):
        raise UsageError(
            f"--extension {redact(given)!r}: its name {name!r} is not a plain project name (letters, digits, "
            "'.', '_', '-'); rename the folder"
        )
    return canonical
