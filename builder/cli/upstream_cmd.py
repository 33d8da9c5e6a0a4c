"""`torchyard matrix verify | sync | lock | html`: the matrix against upstream, and the compatibility page."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from builder.cli.options import matrix_of
from builder.cli.output import emit_json
from builder.errors import UsageError
from builder.render.network import CA_ENV_VARS
from builder.versions import parse_spec

_UPSTREAM_OPTIONS = (
    click.option("--offline-cache", metavar="DIR", help="Keep upstream answers in DIR: a rerun reads them from there."),
    click.option(
        "--cache-max-age",
        default=86400.0,
        show_default=True,
        type=float,
        metavar="SECONDS",
        help="Index pages and tags older than this are asked again (wheel bytes and digests never expire).",
    ),
    click.option("--max-requests", default=5000, show_default=True, type=int, metavar="N", help="Request budget."),
    click.option("--timeout", default=20.0, show_default=True, type=float, metavar="SECONDS", help="Per request."),
    click.option("--jobs", default=8, show_default=True, type=int, metavar="N", help="Requests in flight at most."),
    click.option(
        "--ca-bundle",
        metavar="FILE",
        help="CA bundle for HTTPS (default: $PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE, else certifi's).",
    ),
    click.option(
        "--pypi-url", metavar="URL", help="A mirror of PyPI's simple index (default https://pypi.org/simple)."
    ),
    click.option(
        "--pytorch-index-url",
        metavar="URL",
        help="A mirror of PyTorch's wheel indexes, <URL>/<variant> (default https://download.pytorch.org/whl).",
    ),
    click.option("--registry-mirror", metavar="HOST", help="Ask this registry for Docker Hub images (a mirror)."),
)


def upstream_options(func: Any) -> Any:
    for option in reversed(_UPSTREAM_OPTIONS):
        func = option(func)
    return func


def clients(kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """An Http client (cache, budget, timeout, parallelism, CA) and the registry client on top of it."""
    from builder.net.cache import DiskCache
    from builder.net.http import Http, Policy
    from builder.oci.client import Distribution

    budget, timeout, jobs = kwargs.pop("max_requests"), kwargs.pop("timeout"), kwargs.pop("jobs")
    if budget < 1 or timeout <= 0 or jobs < 1:
        raise UsageError("--max-requests, --timeout and --jobs take positive numbers")
    folder, max_age = kwargs.pop("offline_cache"), kwargs.pop("cache_max_age")
    cache = DiskCache(Path(folder), max_age=max_age) if folder else None
    http = Http(Policy(timeout=timeout, budget=budget, workers=jobs), cache=cache, verify=_ca(kwargs.pop("ca_bundle")))
    return http, Distribution(http)


def _ca(flag: str | None) -> str | bool:
    path = flag or next((os.environ[v] for v in CA_ENV_VARS if os.environ.get(v)), None)
    if path is None:
        return True
    if not Path(path).is_file():
        raise UsageError(f"CA bundle {path!r} is not a readable file (--ca-bundle, or $PIP_CERT/$SSL_CERT_FILE)")
    return path


@click.command("verify")
@click.option(
    "--only", multiple=True, metavar="KIND", help="torch, companions, images, lock (repeatable; default all)."
)
@click.option("--torch", "torch_spec", metavar="SPEC", help="Only these torch releases (and their companions).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema 1).")
@click.option("--markdown", is_flag=True, help="Print the report as Markdown (a CI job summary).")
@click.option("--verbose", is_flag=True, help="List every item, the ones that hold too.")
@upstream_options
@click.pass_context
def verify_cmd(
    ctx: click.Context,
    /,
    only: tuple[str, ...],
    torch_spec: str | None,
    as_json: bool,
    markdown: bool,
    verbose: bool,
    **kwargs: Any,
) -> None:
    """Check matrix.toml against upstream: every torch / torchvision / torchaudio release on its index (exists,
    not yanked, a wheel for every Python and platform claimed, Requires-Dist pins), every base image tag on
    its registry for every platform built, and the base-image lock. Exit 0 all holds, 1 drift, 2 bad input,
    5 upstream unreachable (what could not be checked is never counted as holding)."""
    from builder.matrix.lock import lock_path, read_lock
    from builder.upstream import report as reports
    from builder.upstream.index import PYPI
    from builder.upstream.verify import PYTORCH_INDEX, VerifyOptions, parse_only, verify

    if as_json and markdown:
        raise UsageError("--json and --markdown: pick one")
    m = matrix_of(ctx)
    options = VerifyOptions(
        only=parse_only(only),
        torch=parse_spec(torch_spec, "--torch") if torch_spec else None,
        pypi_url=kwargs.pop("pypi_url") or PYPI,
        pytorch_index=kwargs.pop("pytorch_index_url") or PYTORCH_INDEX,
        registry_mirror=kwargs.pop("registry_mirror"),
    )
    if options.torch is not None and not any(r.version in options.torch for r in m.torch):
        raise UsageError(f"--torch {torch_spec}: no torch release in the matrix matches")
    http, registry = clients(kwargs)
    report = verify(m, http, registry, options, read_lock(lock_path(m.path)))
    if as_json:
        emit_json(report.as_json())
    else:
        click.echo(reports.markdown(report) if markdown else reports.text(report, verbose=verbose), nl=False)
    sys.exit(report.exit_code)
