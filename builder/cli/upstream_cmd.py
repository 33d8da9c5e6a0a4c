"""`torchyard matrix verify | lock | html`: the matrix against upstream, and the compatibility page; the client
flags every upstream command shares (`matrix sync`: builder/cli/sync_cmd.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.cli.options import folder, matrix_of, publish_set_option, repository
from builder.cli.output import emit_json
from builder.cli.request import takes
from builder.core import env
from builder.core.errors import UsageError
from builder.core.versions import parse_spec, release_of_build
from builder.matrix.model import Matrix
from builder.render.network import CA_ENV_VARS

if TYPE_CHECKING:  # upstream's modules are imported where a command runs: --help stays fast
    from builder.upstream.report import Report as VerifyReport
    from builder.upstream.verify import VerifyOptions

F = TypeVar("F", bound=Callable[..., Any])

_UPSTREAM_OPTIONS = (
    click.option(
        "--offline-cache",
        metavar="DIR",
        callback=folder,
        help="Keep upstream answers in DIR: a rerun reads them from there.",
    ),
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
)
_INDEX_OPTIONS = (
    click.option(
        "--pypi-url", metavar="URL", help="A mirror of PyPI's simple index (default https://pypi.org/simple)."
    ),
    click.option(
        "--pytorch-index-url",
        metavar="URL",
        help="A mirror of PyTorch's wheel indexes, <URL>/<variant> (default https://download.pytorch.org/whl).",
    ),
)
_REGISTRY_OPTIONS = (
    click.option("--registry-mirror", metavar="HOST", help="Ask this registry for Docker Hub images (a mirror)."),
)


def upstream_options(*, indexes: bool = True, registries: bool = True, cache: bool = True) -> Callable[[F], F]:
    common = _UPSTREAM_OPTIONS if cache else _UPSTREAM_OPTIONS[2:]  # a lock asks the registries afresh
    chosen = common + (_INDEX_OPTIONS if indexes else ()) + (_REGISTRY_OPTIONS if registries else ())

    def decorate(func: F) -> F:
        for option in reversed(chosen):
            func = option(func)
        return func

    return decorate


def clients(kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """An Http client (cache, budget, timeout, parallelism, CA) and the registry client on top of it."""
    from builder.net.cache import DiskCache
    from builder.net.http import Http, Policy
    from builder.oci.client import Distribution

    budget, timeout, jobs = kwargs.pop("max_requests"), kwargs.pop("timeout"), kwargs.pop("jobs")
    if budget < 1 or timeout <= 0 or jobs < 1:
        raise UsageError("--max-requests, --timeout and --jobs take positive numbers")
    folder, max_age = kwargs.pop("offline_cache", None), kwargs.pop("cache_max_age", 0.0)
    cache = DiskCache(Path(folder), max_age=max_age) if folder else None
    http = Http(
        Policy(timeout=timeout, budget=budget, workers=jobs), cache=cache, verify=ca_bundle(kwargs.pop("ca_bundle"))
    )
    return http, Distribution(http)


def ca_bundle(flag: str | None) -> str | bool:
    path = flag or next((os.environ[v] for v in CA_ENV_VARS if os.environ.get(v)), None)
    if path is None:
        return True
    if not Path(path).is_file():
        raise UsageError(f"CA bundle {path!r} is not a readable file (--ca-bundle, or $PIP_CERT/$SSL_CERT_FILE)")
    return path


@dataclass(frozen=True, kw_only=True)
class VerifyFlags:
    """`torchyard matrix verify`'s own flags; the client flags (cache, budget, CA) go on to clients()."""

    only: tuple[str, ...]
    torch_spec: str | None
    as_json: bool
    markdown: bool
    verbose: bool
    pypi_url: str | None
    pytorch_index_url: str | None
    registry_mirror: str | None
    shared: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.as_json and self.markdown:
            raise UsageError("--json and --markdown: pick one")


@click.command("verify")
@click.option(
    "--only", multiple=True, metavar="KIND", help="torch, companions, images, lock (repeatable; default all)."
)
@click.option("--torch", "torch_spec", metavar="SPEC", help="Only these torch releases (and their companions).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema 1).")
@click.option("--markdown", is_flag=True, help="Print the report as Markdown (a CI job summary).")
@click.option("--verbose", is_flag=True, help="List every item, the ones that hold too.")
@upstream_options()
@click.pass_context
@takes(VerifyFlags)
def verify_cmd(ctx: click.Context, flags: VerifyFlags) -> None:
    """Check matrix.toml against upstream: every torch / torchvision / torchaudio release on its index (exists,
    not yanked, a wheel for every Python and platform claimed, Requires-Dist pins), every base image tag on
    its registry for every platform built, and the base-image lock. Exit 0 all holds, 1 drift, 2 bad input,
    5 upstream unreachable (what could not be checked is never counted as holding)."""
    from builder.matrix.lock import lock_path, read_lock
    from builder.upstream.verify import verify

    m = matrix_of(ctx)
    options = _verify_options(m, flags)
    http, registry = clients(dict(flags.shared))
    report = verify(m, http, registry, options, read_lock(lock_path(m.path)))
    _print_verify(report, flags)
    sys.exit(report.exit_code)


def _verify_options(m: Matrix, flags: VerifyFlags) -> VerifyOptions:
    from builder.upstream.index import PYPI
    from builder.upstream.verify import PYTORCH_INDEX, VerifyOptions, parse_only

    spec = release_of_build(flags.torch_spec, "--torch", "matrix verify") if flags.torch_spec else None
    options = VerifyOptions(
        only=parse_only(flags.only),
        torch=parse_spec(spec, "--torch") if spec else None,
        pypi_url=flags.pypi_url or PYPI,
        pytorch_index=flags.pytorch_index_url or PYTORCH_INDEX,
        registry_mirror=flags.registry_mirror,
    )
    if options.torch is not None and not any(r.version in options.torch for r in m.torch):
        raise UsageError(f"--torch {flags.torch_spec}: no torch release in the matrix matches")
    return options


def _print_verify(report: VerifyReport, flags: VerifyFlags) -> None:
    from builder.upstream import report as reports

    if flags.as_json:
        emit_json(report.as_json())
    else:
        text = reports.markdown(report) if flags.markdown else reports.text(report, verbose=flags.verbose)
        click.echo(text, nl=False)
    if report.exit_code == 5:  # the report says what; the error line says why the exit code
        hosts = sorted({f.upstream.split(" is unreachable")[0] for f in report.unreachable})
        click.echo(
            f"torchyard: error: {len(report.unreachable)} item(s) not checked, upstream unreachable or unreadable "
            f"({'; '.join(hosts)[:200]}): nothing unchecked counts as holding",
            err=True,
        )


@click.command("lock")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the lock would change.")
@upstream_options(indexes=False, cache=False)
@click.pass_context
def lock_cmd(ctx: click.Context, /, check: bool, **kwargs: Any) -> None:
    """Resolve every base image tag the templates can produce to its digest on each platform the matrix
    builds, and write them to matrix.lock next to the matrix. Renders and builds pin FROM image@digest
    with --locked (the content hash then covers the digest: a moved base rebuilds exactly its images)."""
    from builder.matrix.lock import lock_path, read_lock, write_lock
    from builder.upstream.lock import changes, make_lock

    m = matrix_of(ctx)
    path = lock_path(m.path)
    mirror = kwargs.pop("registry_mirror")
    _, registry = clients(kwargs)
    old = read_lock(path)
    new = make_lock(m, registry, str(path), mirror)
    moved = changes(old, new)
    for change in moved:
        click.echo(f"{change.ref} {change.platform}: {change.before or 'not locked'} -> {change.after}")
    stale = sorted({i.ref for i in old.images} - {i.ref for i in new.images}) if old else []
    for ref in stale:
        click.echo(f"{ref}: no longer produced by the templates, dropped")
    if check:
        click.echo(f"{path}: {'out of date' if moved or stale else 'up to date'} ({len(new.images)} images)")
        sys.exit(1 if moved or stale else 0)
    if moved or stale or old is None:
        _writable(path)
        write_lock(new)
    click.echo(f"{path}: {len(new.images)} images, {len(moved)} digest(s) changed")


def relock(m: Any, say: Callable[[str], None]) -> None:
    """`publish --relock`: the lock made again from the registries (default client settings)."""
    from builder.matrix.lock import lock_path, read_lock, write_lock
    from builder.net.http import Http
    from builder.oci.client import Distribution
    from builder.upstream.lock import changes, make_lock

    path = lock_path(m.path)
    new = make_lock(m, Distribution(Http(verify=ca_bundle(None))), str(path))
    moved = changes(read_lock(path), new)
    _writable(path)
    write_lock(new)
    say(f"relocked {path}: {len(moved)} base image digest(s) moved")


def _writable(path: Path) -> None:
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"{path.parent} is not writable: lock a matrix of your own (--matrix FILE)")


def registry_repository(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A repository a reader can pull from: its first part names a registry host (a public page's run lines)."""
    from builder.host.locate import registry_of

    checked = repository(ctx, param, value)
    if checked is None:
        raise UsageError(
            "--repo REGISTRY/NAME is needed: a public page's `docker run` lines name a repository its readers can "
            f"pull (ghcr.io/acme/torch; or ${env.REPO})"
        )
    if registry_of(checked) is None:
        raise UsageError(
            f"--repo {checked}: names no registry (ghcr.io/acme/torch, registry.example.com/ml/torch): a public "
            "page's `docker run` lines need a repository its readers can pull"
        )
    return checked


@click.command("html")
@click.option(
    "-o", "--output", "output", required=True, metavar="DIR", callback=folder, help="Where index.html is written."
)
@click.option(
    "--repo",
    envvar=env.REPO,
    metavar="REGISTRY/NAME",
    callback=registry_repository,
    help=f"Where the published images are pulled from, a registry repository (${env.REPO}): the page's run lines "
    "name it.",
)
@publish_set_option
@click.pass_context
def html_cmd(ctx: click.Context, /, output: str, repo: str) -> None:
    """Write the compatibility page: one self-contained HTML file (no external assets) with the torch x CUDA
    grid, driver floors, each wheel's GPU code, and a selector (driver, GPU, Python, platform) answering
    which published images run and why the others do not, by the same rules as `torchyard lookup`."""
    from builder.site.render import write_page

    path = write_page(matrix_of(ctx, publish_set=True), repo, Path(output))
    click.echo(f"{path} ({path.stat().st_size // 1024} KB)")
