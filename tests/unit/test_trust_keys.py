"""The team's signing key (builder/trust/keys.py): read from a file or the environment, refused with one line
when missing, unreadable, readable by others or not a P-256 key, and never shown."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from trust_kit import write_key

from builder.core.env import SIGN_KEY, SIGN_KEY_PASSWORD
from builder.core.errors import UsageError
from builder.trust.keys import public_key, signing_key, verifies


def test_a_private_key_file_signs_and_its_public_half_verifies(tmp_path: Path) -> None:
    key = signing_key(write_key(tmp_path), {})
    assert key is not None
    signature = key.sign(b"payload")
    public = public_key(tmp_path / "key.pem.pub")
    assert verifies(public, b"payload", signature)
    assert not verifies(public, b"payload!", signature)
    assert not verifies(public, b"payload", base64.b64encode(b"not a signature").decode())
    assert not verifies(public, b"payload", "%%% not base64")


def test_the_key_from_the_environment_and_none_without_either(tmp_path: Path) -> None:
    pem = write_key(tmp_path).read_text()
    key = signing_key(None, {SIGN_KEY: pem})
    assert key is not None and key.where == f"${SIGN_KEY}"
    assert signing_key(None, {}) is None


def test_the_key_never_shows_in_its_repr(tmp_path: Path) -> None:
    path = write_key(tmp_path)
    key = signing_key(path, {})
    body = path.read_text().splitlines()[1]
    assert body not in repr(key) and repr(key) == f"SigningKey(--sign-key {path})"


@pytest.mark.parametrize(
    ("mode", "shown"), [(0o644, "0644"), (0o640, "0640"), (0o604, "0604"), (0o620, "0620")]
)  # fmt: skip
def test_a_key_others_may_read_or_change_is_refused(tmp_path: Path, mode: int, shown: str) -> None:
    path = write_key(tmp_path, mode=mode)
    with pytest.raises(UsageError) as caught:
        signing_key(path, {})
    assert str(caught.value) == f"--sign-key {path}: others may read or change it (mode {shown}): chmod 600 {path}"
    assert caught.value.exit_code == 2


def test_missing_unreadable_and_wrong_keys_are_one_line_each(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--sign-key .*nope.pem: no such file$"):
        signing_key(tmp_path / "nope.pem", {})
    with pytest.raises(UsageError, match=r": not a file$"):
        signing_key(tmp_path, {})
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("SECRET-LOOKING-TEXT")
    garbage.chmod(0o600)
    with pytest.raises(UsageError) as caught:
        signing_key(garbage, {})
    assert "SECRET-LOOKING-TEXT" not in str(caught.value) and "not a PEM private key" in str(caught.value)
    with pytest.raises(UsageError, match="not an ECDSA P-256 key"):
        signing_key(write_key(tmp_path, "rsa.pem", curve=False), {})
    with pytest.raises(UsageError, match=rf"^\${SIGN_KEY}: not a PEM private key"):
        signing_key(None, {SIGN_KEY: "nothing"})


def test_an_encrypted_key_needs_its_password(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = tmp_path / "enc.pem"
    key = ec.generate_private_key(ec.SECP256R1())
    encryption = serialization.BestAvailableEncryption(b"s3cret")
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    path.chmod(0o600)
    with pytest.raises(UsageError, match=f"encrypted: give its password in \\${SIGN_KEY_PASSWORD}"):
        signing_key(path, {})
    assert signing_key(path, {SIGN_KEY_PASSWORD: "s3cret"}) is not None
    with pytest.raises(UsageError, match="wrong"):
        signing_key(path, {SIGN_KEY_PASSWORD: "wrong"})


def test_a_public_key_that_is_not_p256_is_refused(tmp_path: Path) -> None:
    write_key(tmp_path, "rsa.pem", curve=False)
    with pytest.raises(UsageError, match="not an ECDSA P-256 public key"):
        public_key(tmp_path / "rsa.pem.pub")
    with pytest.raises(UsageError, match="cannot be read"):
        public_key(tmp_path / "missing.pub")


def test_no_settings_object_that_carries_the_key_shows_it(tmp_path: Path) -> None:
    from builder.core.kinds import Flavor
    from builder.pipeline.pipeline import BuildSettings
    from builder.publish.run import PublishSettings
    from builder.trust.attest import TrustSettings

    path = write_key(tmp_path)
    trust = TrustSettings(key=signing_key(path, {}))
    body = path.read_text().splitlines()[1]
    build = BuildSettings(repo="r", flavors=(Flavor.RUNTIME,), out_dir=tmp_path, trust=trust)
    publish = PublishSettings(repo="r", out_root=tmp_path, trust=trust)
    assert not [text for text in (repr(trust), repr(build), repr(publish), str(vars(trust))) if body in text]
