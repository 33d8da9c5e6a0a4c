"""The attestation flags build and publish share: --sign-key PATH (or $TORCHYARD_SIGN_KEY) and --attest.
The key is read and checked here, before anything is built, so a missing, unreadable or readable-by-others key
stops the run with one line (exit 2) and no image is built, tagged or pushed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from builder.core import env
from builder.core.errors import UsageError
from builder.core.provenance import REVISION, SOURCE, provenance_labels

if TYPE_CHECKING:  # builder.trust loads cryptography and cyclonedx: only where a command attests
    from builder.trust.attest import TrustSettings

F = TypeVar("F", bound=Callable[..., Any])


def sign_key_option(what: str) -> Callable[[F], F]:
    """--sign-key PATH; `what` says what it signs, and when."""
    return click.option(
        "--sign-key",
        metavar="PATH",
        type=click.Path(path_type=Path, dir_okay=False),
        help=f"Sign {what} with this ECDSA P-256 PEM key (mode 0600; or the key itself in ${env.SIGN_KEY}). "
        "Implies --attest.",
    )


_OPTIONS = (
    sign_key_option("each pushed image, its SBOM and provenance"),
    click.option(
        "--attest",
        is_flag=True,
        help="With --push: attach a CycloneDX SBOM and a SLSA provenance statement to each pushed image.",
    ),
)


def trust_options(func: F) -> F:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def trust_settings(sign_key: Path | None, attest: bool, push: bool, matrix_path: str) -> TrustSettings | None:
    """None when nothing is to be attested; UsageError (2) for a bad key or a key without a push."""
    from builder.cli.upstream_cmd import ca_bundle
    from builder.lock.sbom_hashes import index_hasher
    from builder.trust.attest import TrustSettings
    from builder.trust.keys import signing_key
    from builder.trust.slsa import LOCAL_BUILDER, Material

    key = signing_key(sign_key, os.environ)
    if key is None and not attest:
        return None
    if not push:
        raise UsageError(f"{key.where if key else '--attest'}: needs --push (attestations live in the registry)")
    checkout = Path(matrix_path).parent
    labels = provenance_labels(checkout, {k: v for k, v in os.environ.items() if k != env.PROVENANCE})
    source, commit = labels.get(SOURCE), labels.get(REVISION)
    sha = hashlib.sha256(Path(matrix_path).read_bytes()).hexdigest()
    uri = f"git+{source}@{commit}#matrix.toml" if source and commit else f"file:{Path(matrix_path).name}"
    return TrustSettings(
        key=key,
        facts={"matrix-commit": commit, "matrix-sha256": sha},
        builder_id=source or LOCAL_BUILDER,
        materials=(Material(uri, sha, "matrix.toml"),),
        wheel_hashes=index_hasher(ca_bundle(None)),  # the SBOM's wheel sha256s from the build's indexes
    )
