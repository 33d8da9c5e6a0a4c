"""`torchyard promote SRC DST`: copy a verified image to its public tag registry-side."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builder.cli.output import emit_json
from builder.cli.registry_flags import registry_auth, registry_options
from builder.cli.request import takes
from builder.cli.trust_flags import sign_key_option
from builder.core.errors import UsageError
from builder.oci.refs import parse_ref

if TYPE_CHECKING:
    from builder.oci.client import Distribution
    from builder.publish.promote_refresh import PackageCheck
    from builder.trust.keys import SigningKey

_HASH = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True)
class PromoteFlags:
    """`torchyard promote`'s arguments and flags, checked before the registry is asked anything."""

    source: str
    target: str
    content_hash: str | None
    zstd: bool
    attest: bool
    sign_key: Path | None
    registry_user: str | None
    registry_password_stdin: bool
    as_json: bool
    build_tag: bool = True  # --no-build-tag: no <tag>-<YYYYMMDD> beside DST
    keep_unchanged: bool = False  # a refreshed SRC with DST's packages leaves DST (publish/promote_refresh.py)

    def __post_init__(self) -> None:
        parse_ref(self.source, "SRC")
        dst = parse_ref(self.target, "DST")
        if dst.tag is None or dst.digest is not None:
            raise UsageError(f"DST {self.target!r}: name a tag (repo:tag) to promote to")
        if self.content_hash is not None and not _HASH.match(self.content_hash):
            raise UsageError(f"--content-hash {self.content_hash!r}: expected 64 lower-case hex digits")
        if self.zstd:
            from builder.oci.zstd import zstd_tag

            zstd_tag(dst.tag)  # a tag too long for its copy is refused before anything is promoted


@click.command("promote")
@click.argument("source", metavar="SRC")
@click.argument("target", metavar="DST")
@click.option(
    "--content-hash",
    metavar="SHA256",
    help="Promote only if every platform image of SRC carries this io.torchyard.content-hash label.",
)
@click.option("--zstd", is_flag=True, help="Then write a zstd copy of DST under DST-zstd (gzip stays the default).")
@click.option(
    "--attest",
    is_flag=True,
    help="Carry SRC's SBOM and provenance (build --attest) to DST, signed with the key when one is given; "
    "SRC without them: nothing promoted (exit 5).",
)
@sign_key_option("DST, its platform images, SBOMs and provenance, before DST's tag is written,")
@registry_options
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("--build-tag/--no-build-tag", default=True, show_default=True,
              help="Also write DST's build tag, <tag>-<YYYYMMDD>[.N] (never rewritten), before DST names a new "
                   "digest.")  # fmt: skip
@click.option("--keep-unchanged", is_flag=True,
              help="For a SRC built with --refresh: when its SBOM lists the packages DST's SBOM lists (signed with "
                   "the key when one is given), keep DST as it is (nothing copied, signed or tagged); otherwise "
                   "promote and list the package changes, or say why they were not compared.")  # fmt: skip
@takes(PromoteFlags)
def promote_cmd(flags: PromoteFlags) -> None:
    """Copy SRC (repo:tag or repo@digest) to DST (repo:tag) inside the registry: blobs by cross-repository
    mount (copied when SRC is on another registry), then the manifest or index byte for byte, so DST has
    SRC's digest. Nothing is pulled through a Docker engine."""
    from builder.oci.client import Distribution
    from builder.publish.promote_refresh import check_packages, kept_json
    from builder.trust.keys import signing_key

    key = signing_key(flags.sign_key, os.environ)  # a bad key: exit 2 before the registry is asked anything
    src, dst = parse_ref(flags.source, "SRC"), parse_ref(flags.target, "DST")
    client = Distribution(auth=registry_auth(flags.registry_user, flags.registry_password_stdin))
    found = check_packages(client, src, dst, flags.content_hash, key) if flags.keep_unchanged else None
    if found is not None and found.unchanged:  # DST stays: no copy, no signature, no build tag, no zstd copy
        if flags.as_json:
            emit_json(kept_json(flags.source, flags.target, found))
        else:
            click.echo("\n".join(found.lines(flags.target)))
        return
    _promote(flags, client, key, found)


def _promote(flags: PromoteFlags, client: Distribution, key: SigningKey | None, found: PackageCheck | None) -> None:
    """The promotion itself, and what it printed (with --keep-unchanged, the package changes or why not compared)."""
    from builder.oci.promote import promote
    from builder.oci.zstd import zstd_copy
    from builder.publish.promote_tag import BuildTagStamp
    from builder.trust import cosign
    from builder.trust.carry import carry

    src, dst = parse_ref(flags.source, "SRC"), parse_ref(flags.target, "DST")
    carried, before_tag = carry(client, src.repo, dst.repo, key) if flags.attest or key else (None, None)
    stamp = BuildTagStamp(client, dst, before_tag) if flags.build_tag else None
    result = promote(client, src, dst, flags.content_hash, stamp or before_tag)
    signs = cosign.signer(client, dst.repo, key) if key is not None else None
    copy = zstd_copy(client, dst, before_tag=signs) if flags.zstd else None
    if flags.as_json:
        extra: dict[str, Any] = {"zstd": copy.as_json()} if copy else {}
        extra |= ({"attestations": carried.as_json()} if carried else {}) | (_compared(found) if found else {})
        emit_json({"schema": 1, **result.as_json(), "build_tag": stamp.written if stamp else None} | extra)
        return
    click.echo(result.summary())
    for line in found.lines(flags.target) if found else ():
        click.echo(line)
    if stamp is not None and stamp.written:
        click.echo(f"build tag {stamp.written} (never rewritten) = {flags.target}")
    if carried is not None:
        click.echo(carried.summary())
    if copy is not None:
        click.echo(copy.summary())


def _compared(found: PackageCheck) -> dict[str, Any]:
    """--keep-unchanged's fields of a promotion that went ahead: DST was not kept, and the package verdict."""
    return {"kept": False, "refresh": found.as_json()}
