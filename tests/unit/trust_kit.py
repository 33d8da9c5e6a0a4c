"""Keys and an in-memory registry holding one image, for the trust tests."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from http_kit import Net
from registry_kit import MemoryRegistry

from builder.oci.client import Distribution

HOST = "127.0.0.1:5000"
REPO = "team/torch"


def write_key(folder: Path, name: str = "key.pem", mode: int = 0o600, *, curve: bool = True) -> Path:
    """A fresh private key (P-256, or RSA with curve=False) in a file of this mode; its public half beside it."""
    key = ec.generate_private_key(ec.SECP256R1()) if curve else rsa.generate_private_key(65537, 2048)
    path = folder / name
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(mode)
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (folder / f"{name}.pub").write_bytes(public)
    return path


def registry(*, referrers_api: bool = False) -> tuple[MemoryRegistry, Distribution]:
    net = Net()
    memory = MemoryRegistry(HOST, referrers_api=referrers_api).attach(net)
    return memory, Distribution(net.http(), docker_login=False)
