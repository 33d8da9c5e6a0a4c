"""The team's signing key: ECDSA P-256 (what cosign's and skopeo's sigstore signatures use), read from a file
(--sign-key PATH) or from $TORCHYARD_SIGN_KEY (the PEM itself), checked before any build starts.

A key is never printed, logged, written to the output folder or passed into a build: SigningKey's repr hides
it, and every error names the file or the variable, never its content. A key file others may read (any group
or other permission bit, as ssh refuses) is refused: it is not a team secret any more.
"""

from __future__ import annotations

import base64
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from builder.core.env import SIGN_KEY, SIGN_KEY_PASSWORD
from builder.core.errors import UsageError

if TYPE_CHECKING:  # cryptography is imported where a key is read or used: `--help` and plain builds stay fast
    from cryptography.hazmat.primitives.asymmetric import ec


class SigningKey:
    """A P-256 private key. Sign with it; show only its public half."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, where: str) -> None:
        self._key = key
        self.where = where  # "--sign-key /path" or "$TORCHYARD_SIGN_KEY": for messages

    def __repr__(self) -> str:
        return f"SigningKey({self.where})"

    def sign(self, data: bytes) -> str:
        """The base64 of an ASN.1 DER ECDSA-SHA256 signature: the form cosign stores in its annotation."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return base64.b64encode(self._key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()

    def public(self) -> ec.EllipticCurvePublicKey:
        return self._key.public_key()

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def signing_key(path: Path | None, env: Mapping[str, str]) -> SigningKey | None:
    """The key from --sign-key PATH, else from $TORCHYARD_SIGN_KEY; None when neither is given."""
    if path is not None:
        where = f"--sign-key {path}"
        return _private(_read_protected(path, where), where, env)
    if env.get(SIGN_KEY):
        return _private(env[SIGN_KEY].encode(), f"${SIGN_KEY}", env)
    return None


def _read_protected(path: Path, where: str) -> bytes:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UsageError(f"{where}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{where}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{where}: not a file")
    if mode & 0o077:
        raise UsageError(f"{where}: others may read or change it (mode {mode & 0o777:04o}): chmod 600 {path}")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{where}: cannot be read ({exc.strerror})") from None


def _private(pem: bytes, where: str, env: Mapping[str, str]) -> SigningKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    password = env.get(SIGN_KEY_PASSWORD)
    try:
        key = serialization.load_pem_private_key(pem, password.encode() if password else None)
    except TypeError:  # encrypted without a password, or a password for a key that has none
        raise UsageError(f"{where}: the key is encrypted: give its password in ${SIGN_KEY_PASSWORD}") from None
    except (ValueError, UnsupportedAlgorithm):
        raise UsageError(f"{where}: not a PEM private key (or a wrong ${SIGN_KEY_PASSWORD})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise UsageError(f"{where}: not an ECDSA P-256 key (openssl ecparam -name prime256v1 -genkey makes one)")
    return SigningKey(key, where)


def public_key(path: Path) -> ec.EllipticCurvePublicKey:
    """A PEM public key (verify-image --key): P-256 only, as signing_key makes."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"--key {path}: cannot be read ({exc.strerror})") from None
    except (ValueError, UnsupportedAlgorithm):
        raise UsageError(f"--key {path}: not a PEM public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise UsageError(f"--key {path}: not an ECDSA P-256 public key")
    return key


def verifies(key: ec.EllipticCurvePublicKey, data: bytes, signature_b64: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key.verify(base64.b64decode(signature_b64, validate=True), data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True
