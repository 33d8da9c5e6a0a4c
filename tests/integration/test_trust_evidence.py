"""Issue 42, item 6 in the docker tier: `verify-image --sbom --provenance` on the e2e runtime image that
conftest's `signed` attested in the real registry writes the SBOM and provenance it verified, byte for byte as
attached, and they validate (CycloneDX 1.6, an in-toto v1 statement with a SLSA v1 predicate)."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import Signed
from kit import AUTH_USER, torchyard
from test_trust import _client, _env, _manifest

from builder.oci.refs import parse_ref
from builder.trust import intoto, slsa
from builder.trust.attest import read_attached
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE
from builder.trust.sbom import validate
from builder.trust.slsa import MEDIA_TYPE as PROVENANCE_TYPE

pytestmark = pytest.mark.docker


def test_verify_image_writes_the_documents_it_verified(signed: Signed, tmp_path: Path) -> None:
    sbom_path, provenance_path = tmp_path / "sbom.cdx.json", tmp_path / "provenance.intoto.json"
    run = torchyard("verify-image", signed.ref, "--key", str(signed.public), "--registry-user", AUTH_USER,
                    "--sbom", str(sbom_path), "--provenance", str(provenance_path), env=_env())  # fmt: skip
    assert run.code == 0, run.text
    assert f"wrote {sbom_path}" in run.out and f"wrote {provenance_path}" in run.out
    image, digest = parse_ref(signed.ref), _manifest(signed.ref).digest
    for path, kind in ((sbom_path, SBOM_TYPE), (provenance_path, PROVENANCE_TYPE)):
        attached = read_attached(_client(), image.repo, digest, kind)
        assert attached is not None and path.read_bytes() == attached[1]
    validate(sbom_path.read_text())
    statement = json.loads(provenance_path.read_text())
    assert intoto.problem(statement) is None and slsa.problem(statement["predicate"]) is None
    assert intoto.subject_digests(statement) == [digest]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([sbom_path.name, provenance_path.name])


def test_nothing_is_written_for_an_image_another_key_signed(signed: Signed, tmp_path: Path) -> None:
    key, other = tmp_path / "other.pem", tmp_path / "other.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(other)], check=True, capture_output=True)
    target = tmp_path / "sbom.cdx.json"
    run = torchyard("verify-image", signed.ref, "--key", str(other), "--registry-user", AUTH_USER,
                    "--sbom", str(target), env=_env())  # fmt: skip
    assert run.code == 4 and not target.exists(), run.text


def test_the_sbom_has_lock_export_s_sha256_for_every_wheel_and_a_license_entry_for_every_os_package(
    signed: Signed, tmp_path: Path
) -> None:
    """Issue 42's done-means on the shared image: each Python component's sha256 is the one `lock export` finds for
    that wheel (the build's own indexes), every wheel has one, and every Debian package has a license or the
    property "not recorded" (never an empty or missing answer)."""
    sbom_path = tmp_path / "sbom.cdx.json"
    run = torchyard("verify-image", signed.ref, "--key", str(signed.public), "--registry-user", AUTH_USER,
                    "--sbom", str(sbom_path), env=_env())  # fmt: skip
    assert run.code == 0, run.text
    components = json.loads(sbom_path.read_text())["components"]
    export = torchyard("lock", "export", signed.ref, "-o", str(tmp_path / "lock"), env=_env())
    assert export.code == 0, export.text[-3000:]
    lock = tomllib.loads((tmp_path / "lock" / "pylock.toml").read_text())
    locked = {_norm(p["name"]): {w["hashes"]["sha256"] for w in p.get("wheels", [])} for p in lock["packages"]}
    left_out = {_norm(x["name"]) for x in lock["tool"]["torchyard"]["left-out"]}
    python = {_norm(c["name"]): c for c in components if c["purl"].startswith("pkg:pypi/")}
    assert set(python) - left_out - {"pip", "setuptools", "wheel"} <= set(locked)
    hashed = {name: [h["content"] for h in c.get("hashes", []) if h["alg"] == "SHA-256"] for name, c in python.items()}
    differing = {
        name: (h, sorted(locked[name])) for name, h in hashed.items() if name in locked and h != sorted(locked[name])
    }
    assert differing == {}  # one sha256 each, lock export's (a package without one shows here as [] against it)
    debian = [c for c in components if c["purl"].startswith("pkg:deb/")]
    assert debian
    unanswered = [c["name"] for c in debian if not c.get("licenses") and not _not_recorded(c)]
    assert unanswered == []


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _not_recorded(component: dict[str, object]) -> bool:
    properties = component.get("properties") or []
    assert isinstance(properties, list)
    return any(p.get("name") == "torchyard:license" and p.get("value") == "not recorded" for p in properties)
