"""Attachments and signatures in a registry (builder/oci/referrers.py, builder/trust/cosign.py, attest.py,
verify.py) against an in-memory registry, with and without the OCI 1.1 referrers API; and verify-image's
exit codes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from registry_kit import MemoryRegistry
from test_trust_sbom import INVENTORY
from trust_kit import HOST, REPO, registry, write_key

from builder.cli.main import main
from builder.core.errors import PushError
from builder.oci.client import Distribution, digest_of
from builder.oci.referrers import attach, referrers, referrers_tag, sig_tag
from builder.oci.refs import parse_ref, parse_repo
from builder.trust import cosign
from builder.trust.attest import Target, TrustSettings, attest, read_attached
from builder.trust.inventory import Inventory, parse_inventory
from builder.trust.keys import public_key, signing_key
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE
from builder.trust.sbom import Subject, make_sbom
from builder.trust.slsa import MEDIA_TYPE as PROVENANCE_TYPE
from builder.trust.slsa import BuildFacts, Material
from builder.trust.verify import FAILED, NOT_CHECKED, PASSED, verify_image

RP = parse_repo(f"{HOST}/{REPO}")


def _target(memory: MemoryRegistry, client: Distribution, tag: str = "t1", reads: list[int] | None = None) -> Target:
    memory.add_image(REPO, tag, labels={"x": tag})
    manifest = client.manifest(RP, tag)
    assert manifest is not None

    def contents() -> Inventory:
        if reads is not None:
            reads.append(1)
        return parse_inventory(INVENTORY)

    subject = Subject(repo=str(RP), digest=manifest.digest, platform="linux/amd64", os_id="debian-12")
    return Target(client=client, repo=RP, manifest=manifest, subject=subject, contents=contents)


FACTS = BuildFacts(
    torchyard_version="0.1.0",
    materials=(Material("git+https://example.org/t@" + "a" * 40 + "#matrix.toml", "d" * 64, "matrix.toml"),),
    parameters=(("combination", "torch2.14.1-cu130-py3.11-debian12"),),
    started=datetime(2026, 12, 1, 19, 0, tzinfo=UTC),
    finished=datetime(2026, 12, 1, 19, 5, tzinfo=UTC),
)


@pytest.mark.parametrize("api", [False, True], ids=["tag-fallback", "referrers-api"])
def test_an_artifact_is_found_again_by_its_subject(api: bool) -> None:
    memory, client = registry(referrers_api=api)
    target = _target(memory, client)
    done = attach(client, RP, target.manifest, SBOM_TYPE, b'{"a": 1}', {"k": "v"})
    assert done.fallback is not api
    assert ((REPO, referrers_tag(target.manifest.digest)) in memory.manifests) is not api
    listed = referrers(client, RP, target.manifest.digest, SBOM_TYPE)
    assert [item["digest"] for item in listed] == [done.digest]
    assert referrers(client, RP, target.manifest.digest, PROVENANCE_TYPE) == []
    assert read_attached(client, RP, target.manifest.digest, SBOM_TYPE) == (done.digest, b'{"a": 1}')
    again = attach(client, RP, target.manifest, SBOM_TYPE, b'{"a": 1}', {"k": "v"})
    assert again.digest == done.digest and len(referrers(client, RP, target.manifest.digest)) == 1


def test_a_cosign_signature_names_the_repository_and_digest_and_is_stored_as_cosign_does(tmp_path: Path) -> None:
    memory, client = registry()
    digest = _target(memory, client).manifest.digest
    key = signing_key(write_key(tmp_path), {})
    assert key is not None
    assert cosign.sign(client, RP, digest, key) > 0
    assert cosign.sign(client, RP, digest, key) == 0  # already signed by this key: nothing written
    raw, media = memory.manifests[REPO, sig_tag(digest)]
    manifest = json.loads(raw)
    (layer,) = manifest["layers"]
    assert media == manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    payload = json.loads(memory.blobs[REPO, layer["digest"]])
    assert payload == {
        "critical": {
            "identity": {"docker-reference": f"{HOST}/{REPO}"},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    assert cosign.signed_by(client, RP, digest, public_key(tmp_path / "key.pem.pub")) is None


def test_a_signature_by_another_key_or_for_another_digest_does_not_count(tmp_path: Path) -> None:
    memory, client = registry()
    signed = _target(memory, client, "t1").manifest.digest
    copy = _target(memory, client, "t2").manifest.digest  # one label changed: another digest
    key = signing_key(write_key(tmp_path), {})
    assert key is not None
    cosign.sign(client, RP, signed, key)
    other = write_key(tmp_path, "other.pem")
    assert "none made with this key" in str(cosign.signed_by(client, RP, signed, public_key(Path(f"{other}.pub"))))
    mine = public_key(tmp_path / "key.pem.pub")
    assert cosign.signed_by(client, RP, copy, mine) == f"no signature: {RP}:{sig_tag(copy)} does not exist"
    memory.manifests[REPO, sig_tag(copy)] = memory.manifests[REPO, sig_tag(signed)]  # the signature copied over
    assert "a copy under another digest" in str(cosign.signed_by(client, RP, copy, mine))


def test_attest_writes_sbom_provenance_and_signatures_once(tmp_path: Path) -> None:
    memory, client = registry()
    reads: list[int] = []
    target = _target(memory, client, reads=reads)
    key = signing_key(write_key(tmp_path), {})
    settings = TrustSettings(key=key, facts={"matrix-commit": "a" * 40})
    done = attest(target, settings, FACTS)
    assert done.written == ["sbom", "provenance", "signature", "attestation"] and done.fallback
    assert done.signed == [target.manifest.digest, done.sbom, done.provenance]
    assert reads == [1]  # the image's contents were read once, for both
    stored = [len(raw) for (repo, ref), (raw, _) in memory.manifests.items() if ref.startswith("sha256-")]
    assert done.bytes > sum(stored)  # the signatures, the fallback index (as last written), and the documents
    statement = json.loads(read_attached(client, RP, target.manifest.digest, PROVENANCE_TYPE)[1])  # type: ignore[index]
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"][0]["digest"]["sha256"] == target.manifest.digest.removeprefix("sha256:")
    assert statement["predicate"]["runDetails"]["metadata"] == {
        "startedOn": "2026-12-01T19:00:00Z",
        "finishedOn": "2026-12-01T19:05:00Z",
    }
    dependencies = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert dependencies[0] == {"uri": FACTS.materials[0].uri, "name": "matrix.toml", "digest": {"sha256": "d" * 64}}
    assert {"uri": "pkg:pypi/addone@0.1", "digest": {"sha256": "c" * 64}} in dependencies  # a wheel hash it knew
    again = attest(target, settings, FACTS)
    assert again.written == [] and (again.sbom, again.provenance) == (done.sbom, done.provenance) and reads == [1]


def test_verify_accepts_the_attested_image_and_refuses_a_copy_and_an_unsigned_one(tmp_path: Path) -> None:
    memory, client = registry()
    target = _target(memory, client)
    attest(target, TrustSettings(key=signing_key(write_key(tmp_path), {})), FACTS)
    key = public_key(tmp_path / "key.pem.pub")
    verdict = verify_image(client, parse_ref(f"{HOST}/{REPO}:t1"), key)
    assert [(c.name, c.status) for c in verdict.checks] == [
        ("signature", PASSED),
        ("sbom", PASSED),
        ("sbom signature", PASSED),
        ("provenance", PASSED),
        ("provenance signature", PASSED),
        ("sbom attestation", PASSED),
        ("provenance attestation", PASSED),
    ]
    unsigned = _target(memory, client, "t2")
    verdict = verify_image(client, parse_ref(f"{HOST}/{REPO}:t2"), key)
    assert {c.name: c.status for c in verdict.checks} == {
        "signature": FAILED,
        "sbom": FAILED,
        "provenance": FAILED,
        "sbom attestation": FAILED,
        "provenance attestation": FAILED,
    }
    assert verify_image(client, parse_ref(f"{HOST}/{REPO}@{target.manifest.digest}"), None).unchecked
    assert unsigned.manifest.digest != target.manifest.digest


def test_verify_refuses_an_sbom_about_another_image_and_a_registry_serving_other_bytes() -> None:
    memory, client = registry()
    target = _target(memory, client)
    other = Subject(repo=str(RP), digest="sha256:" + "0" * 64, platform="linux/amd64")
    text = make_sbom(parse_inventory(INVENTORY), other, {}, datetime(2026, 12, 1, tzinfo=UTC))
    attach(client, RP, target.manifest, SBOM_TYPE, text.encode(), {})
    verdict = verify_image(client, parse_ref(f"{HOST}/{REPO}:t1"), None)
    (check,) = [c for c in verdict.checks if c.name == "sbom"]
    assert (check.status, check.detail) == (FAILED, f"the SBOM describes {other.digest}, not {target.manifest.digest}")
    layer = digest_of(text.encode())
    memory.blobs[REPO, layer] = text.replace("CycloneDX", "CycloneDY").encode()
    with pytest.raises(PushError, match=f"answered blob {layer} of {REPO} with other content"):
        verify_image(client, parse_ref(f"{HOST}/{REPO}:t1"), None)


def _cli(monkeypatch: pytest.MonkeyPatch, client: Distribution) -> None:
    monkeypatch.setattr("builder.oci.client.Distribution", lambda **_: client)


@pytest.mark.parametrize(("signed", "with_key", "code"), [(True, True, 0), (True, False, 6), (False, True, 4)])
def test_verify_image_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    signed: bool, with_key: bool, code: int,
) -> None:  # fmt: skip
    memory, client = registry()
    target = _target(memory, client)
    if signed:
        attest(target, TrustSettings(key=signing_key(write_key(tmp_path), {})), FACTS)
    else:
        write_key(tmp_path)
    _cli(monkeypatch, client)
    flags = ["--key", str(tmp_path / "key.pem.pub")] if with_key else []
    with pytest.raises(SystemExit) as caught:
        main(["verify-image", f"{HOST}/{REPO}:t1", *flags])
    assert caught.value.code == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == (0 if code == 0 else 1)
    if code == 4:
        assert err.startswith(f"torchyard: error: {HOST}/{REPO}:t1: refused: signature of {target.manifest.digest}")
    if code == 6:
        assert "signatures not checked: give --key PUB" in err
    assert digest_of(b"") not in err


def test_verify_image_json_says_each_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    memory, client = registry()
    attest(_target(memory, client), TrustSettings(key=signing_key(write_key(tmp_path), {})), FACTS)
    _cli(monkeypatch, client)
    with pytest.raises(SystemExit) as caught:
        main(["verify-image", f"{HOST}/{REPO}:t1", "--key", str(tmp_path / "key.pem.pub"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert caught.value.code == 0 and data["status"] == PASSED and len(data["checks"]) == 7
    assert NOT_CHECKED not in {c["status"] for c in data["checks"]}
