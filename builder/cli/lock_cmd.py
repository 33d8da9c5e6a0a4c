"""`torchyard lock export IMAGE`: an image's exact distribution set, with hashes (pylock.toml, requirements.txt);
`torchyard lock check LOCK`: whether each of its pins still holds on its index."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from builder.cli.options import image_reference, matrix_of
from builder.cli.output import emit_json
from builder.cli.request import takes
from builder.core.errors import UsageError
from builder.core.redact import redact

if TYPE_CHECKING:  # builder.lock.check loads packaging and the index reader: only where a lock is checked
    from builder.lock.check import Finding


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


@dataclass(frozen=True, kw_only=True)
class CheckFlags:
    locks: tuple[str, ...]
    ca_bundle: str | None
    as_json: bool


@lock_group.command("check")
@click.argument("locks", metavar="LOCK...", nargs=-1, required=True)
@click.option("--ca-bundle", metavar="FILE", help="CA bundle for the indexes (default: $PIP_CERT, $SSL_CERT_FILE).")
@click.option("--json", "as_json", is_flag=True, help="Print every pin's finding as JSON.")
@takes(CheckFlags)
def check_cmd(flags: CheckFlags) -> None:
    """Re-read the indexes a lock names (pylock.toml, or a hashed requirements.txt, as `lock export` writes them)
    and report each pin whose file is gone or whose sha256 changed upstream, naming the index and both hashes.
    Exit 0 when every pin holds, 4 when one does not, 5 when an index could not be read, 6 when an index gives
    no sha256 to compare, 2 for a lock that cannot be read (FILE:LINE)."""
    from builder.cli.upstream_cmd import ca_bundle
    from builder.lock.check import check_locks
    from builder.lock.pins import read_lock
    from builder.net.http import Http

    locks = [read_lock(Path(path)) for path in flags.locks]  # a bad lock stops here, before any request
    findings = check_locks(Http(verify=ca_bundle(flags.ca_bundle)), locks)
    if flags.as_json:
        emit_json({"schema": 1, "findings": [f.as_json() for f in findings]})
    else:
        for finding in findings:
            click.echo(f"{finding.status:11} {finding.pin.name}=={finding.pin.version}  {finding.detail}"
                       f"  ({finding.pin.where})")  # fmt: skip
    raise_for(findings)
    if not flags.as_json:
        click.echo(f"{len(findings)} pins hold")


def raise_for(findings: tuple[Finding, ...]) -> None:
    """The exit code of the findings: 4 a pin that no longer holds, else 5 an index unread, else 6 a hash not
    given; None when every pin holds."""
    from builder.core.errors import CannotTellError, LockChangedError, UpstreamError
    from builder.lock.check import CHANGED, GONE, NOT_CHECKED, UNREACHABLE

    counts = {s: sum(1 for f in findings if f.status == s) for s in (CHANGED, GONE, UNREACHABLE, NOT_CHECKED)}
    first = {s: next((f for f in findings if f.status == s), None) for s in counts}
    broken = first[CHANGED] or first[GONE]
    if broken is not None:
        pin = broken.pin
        raise LockChangedError(f"{counts[CHANGED] + counts[GONE]} of {len(findings)} pins no longer hold; first: "
                               f"{pin.name}=={pin.version} ({pin.where}): {broken.detail}")  # fmt: skip
    unread, unhashed = first[UNREACHABLE], first[NOT_CHECKED]
    if unread is not None:
        raise UpstreamError(f"{counts[UNREACHABLE]} pins not checked: {unread.index}: {unread.detail}")
    if unhashed is not None:
        raise CannotTellError(f"{counts[NOT_CHECKED]} pins not checked: {unhashed.detail}")
