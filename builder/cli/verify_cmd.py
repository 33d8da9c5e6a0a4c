"""`torchyard verify-image REF`: the image's signature, SBOM and provenance, checked in its registry."""

from __future__ import annotations

from pathlib import Path

import click

from builder.cli.output import emit_json
from builder.cli.registry_flags import registry_auth, registry_options
from builder.core.errors import CannotTellError, TrustError
from builder.oci.refs import parse_ref


@click.command("verify-image")
@click.argument("ref", metavar="REF")
@click.option("--key", "key_path", metavar="PUB", type=click.Path(path_type=Path),
              help="The team's public key (PEM, ECDSA P-256); without it the signatures are not checked.")  # fmt: skip
@registry_options
@click.option("--json", "as_json", is_flag=True, help="Print every check as JSON.")
def verify_cmd(
    ref: str, key_path: Path | None, registry_user: str | None, registry_password_stdin: bool, as_json: bool
) -> None:
    """Check that REF (repo:tag or repo@digest) is signed with the team's key and carries an SBOM and a SLSA
    provenance statement about its exact digest, each signed too, as OCI referrers and as cosign attestations
    (docs/trust.md). Exit 0 when all passed, 4 when one failed (a tampered, unsigned or unattested image), 6 when
    the signatures were not checked."""
    from builder.oci.client import Distribution
    from builder.trust.keys import public_key
    from builder.trust.verify import verify_image

    image = parse_ref(ref, "REF")
    key = public_key(key_path) if key_path is not None else None
    client = Distribution(auth=registry_auth(registry_user, registry_password_stdin))
    verdict = verify_image(client, image, key)
    if as_json:
        emit_json(verdict.as_json())
    else:
        for check in verdict.checks:
            click.echo(f"{check.status:11} {check.digest[:19]} {check.name:22} {check.detail}")
    if verdict.failed:
        first = verdict.failed[0]
        raise TrustError(f"{ref}: refused: {first.name} of {first.digest}: {first.detail}")
    if verdict.unchecked:
        raise CannotTellError(f"{ref}: attached and matching, signatures not checked: give --key PUB")
    if not as_json:
        click.echo(f"{ref}: verified: signed with the key, SBOM and provenance attached and attested for its digest")
