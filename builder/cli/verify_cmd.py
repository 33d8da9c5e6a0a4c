"""`torchyard verify-image REF`: the image's signature, SBOM and provenance, checked in its registry; with --sbom
and --provenance, the documents it verified written out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from builder.cli.output import emit_json
from builder.cli.registry_flags import registry_auth, registry_options
from builder.cli.request import takes
from builder.core.errors import CannotTellError, TrustError, UsageError
from builder.core.files import check_writable
from builder.oci.refs import parse_ref


@dataclass(frozen=True, kw_only=True)
class VerifyImageFlags:
    ref: str
    key_paths: tuple[Path, ...]  # several during a key rotation: a signature by any of them passes
    registry_user: str | None
    registry_password_stdin: bool
    as_json: bool
    sbom_path: Path | None
    provenance_path: Path | None

    def __post_init__(self) -> None:
        flags = [f for f, path in (("--sbom", self.sbom_path), ("--provenance", self.provenance_path)) if path]
        if flags and not self.key_paths:
            raise UsageError(f"{flags[0]}: needs --key PUB (a document is written only once its signature checked out)")
        if self.sbom_path and self.provenance_path and self.sbom_path.absolute() == self.provenance_path.absolute():
            raise UsageError(f"--sbom and --provenance: both name {self.sbom_path}")

    def targets(self) -> dict[str, Path]:
        """Where to write each verified document, checked writable before any request (UsageError: exit 2)."""
        given = (("sbom", "--sbom", self.sbom_path), ("provenance", "--provenance", self.provenance_path))
        return {kind: check_writable(path, flag) for kind, flag, path in given if path is not None}


@click.command("verify-image")
@click.argument("ref", metavar="REF")
@click.option("--key", "key_paths", metavar="PUB", type=click.Path(path_type=Path), multiple=True,
              help="The team's public key (PEM, ECDSA P-256); without it the signatures are not checked. Again for "
                   "each key trusted during a key rotation: a signature by any of them passes.")  # fmt: skip
@registry_options
@click.option("--json", "as_json", is_flag=True, help="Print every check as JSON.")
@click.option("--sbom", "sbom_path", metavar="PATH", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the SBOM it verified here (CycloneDX 1.6 JSON, as attached). Needs --key.")  # fmt: skip
@click.option("--provenance", "provenance_path", metavar="PATH", type=click.Path(path_type=Path, dir_okay=False),
              help="Write the provenance it verified here (an in-toto v1 statement). Needs --key.")  # fmt: skip
@takes(VerifyImageFlags)
def verify_cmd(flags: VerifyImageFlags) -> None:
    """Check that REF (repo:tag or repo@digest) is signed with the team's key and carries an SBOM and a SLSA
    provenance statement about its exact digest, each signed too, as OCI referrers and as cosign attestations
    (docs/trust.md). Exit 0 when all passed, 4 when one failed (a tampered, unsigned or unattested image), 6 when
    the signatures were not checked. --sbom / --provenance write the documents only when all passed."""
    from builder.oci.client import Distribution
    from builder.trust.keys import public_key
    from builder.trust.verify import verify_image, write_documents

    image = parse_ref(flags.ref, "REF")
    targets = flags.targets()
    keys = {str(path): public_key(path) for path in flags.key_paths}
    client = Distribution(auth=registry_auth(flags.registry_user, flags.registry_password_stdin))
    verdict = verify_image(client, image, keys if len(keys) > 1 else next(iter(keys.values()), None))
    if flags.as_json:
        emit_json(verdict.as_json())
    else:
        for check in verdict.checks:
            click.echo(f"{check.status:11} {check.digest[:19]} {check.name:22} {check.detail}")
    if verdict.failed:
        first = verdict.failed[0]
        raise TrustError(f"{flags.ref}: refused: {first.name} of {first.digest}: {first.detail}")
    if verdict.unchecked:
        raise CannotTellError(f"{flags.ref}: attached and matching, signatures not checked: give --key PUB")
    written = write_documents(verdict, targets) if targets else []
    if not flags.as_json:
        signed = "the key" if len(flags.key_paths) == 1 else "one of the keys"
        click.echo(f"{flags.ref}: verified: signed with {signed}, SBOM and provenance attached and attested for its "
                   "digest")  # fmt: skip
        for path in written:
            click.echo(f"wrote {path}")
