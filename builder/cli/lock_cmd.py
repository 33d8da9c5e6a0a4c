"""`torchyard lock export IMAGE`: an image's exact distribution set, with hashes (pylock.toml, requirements.txt)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from builder.cli.options import image_reference, matrix_of
from builder.cli.request import takes
from builder.core.errors import UsageError
from builder.core.redact import redact


@dataclass(frozen=True, kw_only=True)
class ExportFlags:
    image: str
    out_dir: str
    index_urls: tuple[str, ...]
    ca_bundle: str | None

    def __post_init__(self) -> None:
        for url in self.index_urls:
            if not url.startswith(("https://", "http://")):
                raise UsageError(f"--index-url {redact(url)!r}: expected an http(s) URL of a simple index")
            if redact(url) != url:  # the URL is written into requirements.txt and pylock.toml
                raise UsageError(f"--index-url {redact(url)!r}: credentials would land in the lock files")


@click.group("lock")
def lock_group() -> None:
    """The exact distribution set of an image, to install it outside the image (docs/lock.md)."""


@lock_group.command("export")
@click.argument("image", metavar="ID|IMAGE", callback=image_reference)
@click.option("-o", "--output", "out_dir", default=".", show_default=True, metavar="DIR", help="Where to write.")
@click.option(
    "--index-url",
    "index_urls",
    multiple=True,
    metavar="URL",
    help="An index to find the files on, in order (default: the image's PyTorch index, if any, then PyPI).",
)
@click.option("--ca-bundle", metavar="FILE", help="CA bundle for the indexes (default: $PIP_CERT, $SSL_CERT_FILE).")
@click.pass_context
@takes(ExportFlags)
def export_cmd(ctx: click.Context, flags: ExportFlags) -> None:
    """Write DIR/pylock.toml (PEP 751) and DIR/requirements.txt (pip install --require-hashes -r) with every
    Python distribution IMAGE holds, each with the sha256 of the index file it was installed from; for a
    combination ID of the matrix, the set pip resolves now from the matrix's pins."""
    from builder.cli.upstream_cmd import ca_bundle
    from builder.lock.export import export_image, export_lock
    from builder.lock.resolve_id import find_combination, resolve_combination

    ca = ca_bundle(flags.ca_bundle)
    m = matrix_of(ctx)
    if find_combination(m, flags.image) is not None:
        lock = resolve_combination(m, flags.image, ca if isinstance(ca, str) else None)
        done = export_lock(lock, Path(flags.out_dir), tuple(sorted({p.index for p in lock.packages})))
    else:
        from builder.engine import DockerEngine
        from builder.net.http import Http

        done = export_image(DockerEngine(), Http(verify=ca), flags.image, Path(flags.out_dir), flags.index_urls)
    for path in done.written:
        click.echo(f"wrote {path}")
    click.echo(f"{len(done.lock.packages)} distributions locked (indexes: {', '.join(done.indexes)})")
    for left in done.lock.left_out:
        click.echo(f"left out: {left.name}=={left.version}: {left.why}")
