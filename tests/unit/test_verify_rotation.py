"""Key rotation (issue 44 item 6): verify-image takes several keys; a signature and an attestation by any of them
pass and the check names which key made it; the old key dropped, an image signed only with it is refused; signing
again with the new key adds its signatures beside the old ones. In-memory registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from registry_kit import MemoryRegistry
from test_trust_registry import FACTS, _target
from trust_kit import registry, write_key

from builder.cli.main import main
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref
from builder.trust.attest import TrustSettings, attest
from builder.trust.keys import SigningKey, public_key, signing_key
from builder.trust.verify import FAILED, PASSED, verify_image


def _key(folder: Path, name: str) -> SigningKey:
    key = signing_key(write_key(folder, name), {})
    assert key is not None
    return key


def _signed(tmp_path: Path, *names: str) -> tuple[MemoryRegistry, Distribution, str]:
    memory, client = registry()
    target = _target(memory, client, "t1")
    for name in names:
        attest(target, TrustSettings(key=_key(tmp_path, name)), FACTS)
    return memory, client, f"{target.repo}:t1"


def test_an_image_signed_with_the_old_key_passes_while_both_are_trusted(tmp_path: Path) -> None:
    _, client, ref = _signed(tmp_path, "old.pem")
    _key(tmp_path, "new.pem")
    keys = {"old.pub": public_key(tmp_path / "old.pem.pub"), "new.pub": public_key(tmp_path / "new.pem.pub")}
    verdict = verify_image(client, parse_ref(ref), keys)
    assert {c.status for c in verdict.checks} == {PASSED}
    signatures = [c for c in verdict.checks if "signature" in c.name or "attestation" in c.name]
    assert signatures and all("signed with old.pub" in c.detail for c in signatures)


def test_the_old_key_dropped_the_image_signed_only_with_it_is_refused_naming_each_key(tmp_path: Path) -> None:
    _, client, ref = _signed(tmp_path, "old.pem")
    _key(tmp_path, "new.pem")
    _key(tmp_path, "third.pem")
    keys = {"new.pub": public_key(tmp_path / "new.pem.pub"), "third.pub": public_key(tmp_path / "third.pem.pub")}
    verdict = verify_image(client, parse_ref(ref), keys)
    (signature,) = [c for c in verdict.checks if c.name == "signature"]
    assert signature.status == FAILED
    assert "new.pub: " in signature.detail and "third.pub: " in signature.detail
    assert {c.status for c in verdict.checks if c.name.endswith("attestation")} == {FAILED}


def test_signing_again_with_the_new_key_adds_its_signatures_beside_the_old_ones(tmp_path: Path) -> None:
    _, client, ref = _signed(tmp_path, "old.pem", "new.pem")
    for name in ("old", "new"):
        verdict = verify_image(client, parse_ref(ref), public_key(tmp_path / f"{name}.pem.pub"))
        assert {c.status for c in verdict.checks} == {PASSED}, name


def _run(ref: str, *argv: str) -> int:
    with pytest.raises(SystemExit) as caught:
        main(["verify-image", ref, *argv])
    return int(caught.value.code or 0)


def test_the_command_takes_key_again_for_each_key_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, client, ref = _signed(tmp_path, "old.pem")
    _key(tmp_path, "new.pem")
    monkeypatch.setattr("builder.oci.client.Distribution", lambda **_: client)
    old, new = ("--key", str(tmp_path / "old.pem.pub")), ("--key", str(tmp_path / "new.pem.pub"))
    assert _run(ref, *old, *new) == 0
    out = capsys.readouterr().out
    assert f"signed with {tmp_path / 'old.pem.pub'}" in out and "verified: signed with one of the keys" in out
    assert _run(ref, *new) == 4  # the old key dropped: refused
    assert "none made with this key" in capsys.readouterr().err
    assert _run(ref, "--sbom", str(tmp_path / "s.json")) == 2
    assert "needs --key PUB" in capsys.readouterr().err
