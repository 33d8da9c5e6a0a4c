"""Issue 43 item 3: the SBOM and the provenance also as cosign attestations (builder/trust/dsse.py, intoto.py,
cosign_att.py, attest.py's write_att): DSSE envelopes signed over PAE, in-toto statements about the repository and
the digest, one manifest under `sha256-<hex>.att` laid out as cosign 2.5.0 lays it out (its own bytes, written
here by hand: tests/unit/data/cosign/); and verify-image reading them. In-memory registry."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from registry_kit import MemoryRegistry
from test_trust_registry import FACTS, RP, _target
from trust_kit import HOST, REPO, registry, write_key

from builder.oci.client import Distribution, digest_of
from builder.oci.referrers import att_tag
from builder.oci.refs import parse_ref
from builder.trust import cosign, cosign_att, dsse, intoto
from builder.trust.attest import TrustSettings, attest, read_attached
from builder.trust.keys import SigningKey, public_key, signing_key
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE
from builder.trust.slsa import MEDIA_TYPE as PROVENANCE_TYPE
from builder.trust.slsa import PREDICATE_TYPE as SLSA
from builder.trust.verify import FAILED, NOT_CHECKED, PASSED, Check, verify_image

COSIGN = Path(__file__).parent / "data" / "cosign"
DIGEST = "sha256:" + "ab" * 32


def _key(folder: Path, name: str = "key.pem") -> SigningKey:
    key = signing_key(write_key(folder, name), {})
    assert key is not None
    return key


def test_pae_is_the_encoding_of_the_dsse_protocol() -> None:
    # the example of DSSE's protocol.md, and the in-toto payload type cosign signs: lengths in bytes, not characters
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert dsse.pae(dsse.IN_TOTO, '{"é":1}'.encode()) == b'DSSEv1 28 application/vnd.in-toto+json 8 {"\xc3\xa9":1}'


def test_an_envelope_is_signed_over_pae_and_laid_out_as_cosign_writes_it(tmp_path: Path) -> None:
    key = _key(tmp_path)
    body = b'{"_type":"https://in-toto.io/Statement/v1"}'
    raw = dsse.seal(body, key)
    data = json.loads(raw)
    assert list(data) == ["payloadType", "payload", "signatures"]  # cosign's order, compact
    assert raw.startswith(b'{"payloadType":"application/vnd.in-toto+json","payload":"')
    assert base64.b64decode(data["payload"]) == body
    ((keyid, signature),) = [(s["keyid"], s["sig"]) for s in data["signatures"]]
    assert keyid == ""
    der = base64.b64decode(signature)
    key.public().verify(der, dsse.pae(dsse.IN_TOTO, body), ec.ECDSA(hashes.SHA256()))  # over PAE ...
    with pytest.raises(InvalidSignature):
        key.public().verify(der, body, ec.ECDSA(hashes.SHA256()))  # ... not over the bare payload
    envelope = dsse.parse(raw)
    assert envelope.body == body and envelope.signed_by(key.public())
    assert not envelope.signed_by(_key(tmp_path, "other.pem").public())
    forged = raw.replace(data["payload"].encode(), base64.b64encode(body.replace(b"v1", b"v2")))
    assert not dsse.parse(forged).signed_by(key.public())


def test_an_envelope_cosign_2_5_wrote_verifies_with_its_key() -> None:
    envelope = dsse.parse((COSIGN / "slsa-envelope.json").read_bytes())
    assert envelope.payload_type == dsse.IN_TOTO
    assert envelope.signed_by(public_key(COSIGN / "cosign.pub"))
    assert json.loads(envelope.body)["predicateType"] == SLSA


def test_a_url_safe_payload_is_read_as_dsse_allows() -> None:
    raw = json.dumps({"payloadType": "t", "payload": base64.urlsafe_b64encode(b"\xfb\xff").decode(), "signatures": []})
    assert dsse.parse(raw.encode()).body == b"\xfb\xff"


@pytest.mark.parametrize("raw", [b"[]", b'{"payloadType":"x","payload":"%%%","signatures":[]}', b"\xff"])
def test_what_is_not_an_envelope_is_refused_with_a_reason(raw: bytes) -> None:
    with pytest.raises(ValueError, match="not a DSSE envelope"):
        dsse.parse(raw)


def test_a_statement_names_the_repository_and_the_digest() -> None:
    made = intoto.statement(f"{HOST}/{REPO}", DIGEST, intoto.CYCLONEDX, {"bomFormat": "CycloneDX"})
    assert made == (
        b'{"_type":"https://in-toto.io/Statement/v1","predicate":{"bomFormat":"CycloneDX"},'
        b'"predicateType":"https://cyclonedx.org/bom",'
        b'"subject":[{"digest":{"sha256":"' + b"ab" * 32 + b'"},"name":"127.0.0.1:5000/team/torch"}]}'
    )
    assert intoto.subject_digests(json.loads(made)) == [DIGEST]


def test_the_config_of_the_att_image_is_the_one_cosign_2_5_wrote() -> None:
    layer = json.loads((COSIGN / "att-manifest.json").read_bytes())["layers"][0]["digest"]
    assert cosign._config([layer]) == (COSIGN / "att-config.json").read_bytes()
    appended = "sha256:b3001ee475743d226f3d6ed36226b50eb06d6d9ef74a944e86baab38aba321d5"  # its cyclonedx layer
    assert cosign._config([layer, appended]) == (COSIGN / "att-config-2.json").read_bytes()  # a history per layer


def _attested(memory: MemoryRegistry, client: Distribution, tmp_path: Path) -> tuple[str, SigningKey]:
    """The image under t1 attested and signed as a build does, with a fresh key (tmp_path/key.pem)."""
    key = _key(tmp_path)
    target = _target(memory, client, "t1")
    attest(target, TrustSettings(key=key), FACTS)
    return target.manifest.digest, key


def test_attest_writes_the_sbom_and_provenance_under_the_att_tag_as_cosign_does(tmp_path: Path) -> None:
    memory, client = registry()
    digest, key = _attested(memory, client, tmp_path)
    raw, media = memory.manifests[REPO, att_tag(digest)]
    ours, theirs = json.loads(raw), json.loads((COSIGN / "att-manifest.json").read_bytes())
    assert media == ours["mediaType"] == theirs["mediaType"]
    assert ours["config"]["mediaType"] == theirs["config"]["mediaType"]
    layers = ours["layers"]
    assert {layer["mediaType"] for layer in layers} == {theirs["layers"][0]["mediaType"]} == {dsse.MEDIA_TYPE}
    assert [layer["annotations"] for layer in layers] == [
        {"dev.cosignproject.cosign/signature": "", "predicateType": "https://cyclonedx.org/bom"},
        {"dev.cosignproject.cosign/signature": "", "predicateType": "https://slsa.dev/provenance/v1"},
    ]
    assert set(theirs["layers"][0]["annotations"]) == set(layers[0]["annotations"])
    assert memory.blobs[REPO, ours["config"]["digest"]] == cosign._config([layer["digest"] for layer in layers])
    sbom_body, slsa_body = (dsse.parse(memory.blobs[REPO, layer["digest"]]).body for layer in layers)
    assert slsa_body == read_attached(client, RP, digest, PROVENANCE_TYPE)[1]  # type: ignore[index]  # byte for byte
    statement = json.loads(sbom_body)
    assert statement["subject"] == [{"name": f"{HOST}/{REPO}", "digest": {"sha256": digest.removeprefix("sha256:")}}]
    assert statement["predicate"] == json.loads(read_attached(client, RP, digest, SBOM_TYPE)[1])  # type: ignore[index]
    assert all(dsse.parse(memory.blobs[REPO, layer["digest"]]).signed_by(key.public()) for layer in layers)


def test_a_rerun_writes_nothing_and_an_image_attested_before_gets_its_att_without_reading_the_image(
    tmp_path: Path,
) -> None:
    memory, client = registry()
    reads: list[int] = []
    target = _target(memory, client, reads=reads)
    key = _key(tmp_path)
    attest(target, TrustSettings(key=key), FACTS)
    att = memory.manifests[REPO, att_tag(target.manifest.digest)]
    assert attest(target, TrustSettings(key=key), FACTS).written == []
    assert memory.manifests[REPO, att_tag(target.manifest.digest)] == att
    del memory.manifests[REPO, att_tag(target.manifest.digest)]  # as torchyard wrote it before the .att form
    again = attest(target, TrustSettings(key=key), FACTS)
    assert again.written == ["attestation"] and reads == [1]  # the documents read back from the registry
    assert _bodies(memory, target.manifest.digest) == _bodies(memory, target.manifest.digest, att[0])


def _bodies(memory: MemoryRegistry, digest: str, raw: bytes | None = None) -> list[bytes]:
    """The statements the .att tag (or the manifest `raw`) holds (the signatures differ: ECDSA is randomized)."""
    layers = json.loads(raw or memory.manifests[REPO, att_tag(digest)][0])["layers"]
    return [dsse.parse(memory.blobs[REPO, layer["digest"]]).body for layer in layers]


def test_another_key_appends_its_own_envelopes_and_keeps_the_first(tmp_path: Path) -> None:
    memory, client = registry()
    digest, key = _attested(memory, client, tmp_path)
    other = _key(tmp_path, "other.pem")
    target = _target(memory, client, "t1")
    assert attest(target, TrustSettings(key=other), FACTS).written == ["signature", "attestation"]
    layers = json.loads(memory.manifests[REPO, att_tag(digest)][0])["layers"]
    assert len(layers) == 4
    for signer in (key, other):
        assert cosign_att.find(client, RP, digest, SLSA, signer.public()).statement is not None


def _att_checks(client: Distribution, ref: str, key: Path | None) -> list[Check]:
    verdict = verify_image(client, parse_ref(ref), public_key(key) if key else None)
    return [c for c in verdict.checks if c.name.endswith(" attestation")]


def test_verify_image_reads_the_att_form(tmp_path: Path) -> None:
    memory, client = registry()
    digest, _ = _attested(memory, client, tmp_path)
    checks = _att_checks(client, f"{HOST}/{REPO}:t1", tmp_path / "key.pem.pub")
    assert [(c.name, c.status) for c in checks] == [("sbom attestation", PASSED), ("provenance attestation", PASSED)]
    assert checks[1].detail == f"signed with the key ({SLSA}, {att_tag(digest)})"
    unchecked = _att_checks(client, f"{HOST}/{REPO}:t1", None)
    assert {c.status for c in unchecked} == {NOT_CHECKED}
    other = write_key(tmp_path, "other.pem")
    refused = _att_checks(client, f"{HOST}/{REPO}:t1", Path(f"{other}.pub"))
    assert [(c.status, c.detail) for c in refused] == [
        (FAILED, "the https://cyclonedx.org/bom attestation is not signed with this key"),
        (FAILED, "the https://slsa.dev/provenance/v1 attestation is not signed with this key"),
    ]


def test_verify_image_refuses_att_copied_to_a_tampered_image_and_a_missing_one(tmp_path: Path) -> None:
    memory, client = registry()
    digest, _ = _attested(memory, client, tmp_path)
    copy = memory.add_image(REPO, "t2", labels={"x": "tampered"})
    memory.manifests[REPO, att_tag(copy)] = memory.manifests[REPO, att_tag(digest)]  # copied next to the copy
    checks = _att_checks(client, f"{HOST}/{REPO}:t2", tmp_path / "key.pem.pub")
    assert [c.status for c in checks] == [FAILED, FAILED]
    assert checks[0].detail == (
        f"the https://cyclonedx.org/bom statement is about {digest}, not {copy} (a copy under another digest)"
    )
    memory.add_image(REPO, "t3", labels={"x": "unattested"})
    missing = _att_checks(client, f"{HOST}/{REPO}:t3", tmp_path / "key.pem.pub")
    assert [c.status for c in missing] == [FAILED, FAILED] and missing[0].detail.startswith("no attestation: ")
    assert [c.status for c in _att_checks(client, f"{HOST}/{REPO}:t3", None)] == [NOT_CHECKED, NOT_CHECKED]


def test_verify_image_checks_what_the_signed_statement_holds(tmp_path: Path) -> None:
    memory, client = registry()
    target = _target(memory, client)
    key = _key(tmp_path)
    attest(target, TrustSettings(key=key), FACTS)
    digest = target.manifest.digest
    del memory.manifests[REPO, att_tag(digest)]
    sbom = json.loads(read_attached(client, RP, digest, SBOM_TYPE)[1])  # type: ignore[index]
    sbom["metadata"]["component"]["version"] = DIGEST  # a signed statement about this image, holding another's SBOM
    provenance = {"_type": "https://in-toto.io/Statement/v0.1", "predicateType": SLSA,
                  "subject": intoto.subject(str(RP), digest)}  # fmt: skip
    statements = {
        intoto.CYCLONEDX: intoto.statement(str(RP), digest, intoto.CYCLONEDX, sbom),
        SLSA: json.dumps(provenance).encode(),
    }
    cosign_att.add(client, RP, digest, key, statements)
    checks = _att_checks(client, f"{HOST}/{REPO}:t1", tmp_path / "key.pem.pub")
    assert [(c.status, c.detail) for c in checks] == [
        (FAILED, f"the SBOM describes {DIGEST}, not {digest}"),
        (FAILED, "not an in-toto v1 SLSA provenance statement: _type is not https://in-toto.io/Statement/v1"),
    ]


def test_an_annotation_does_not_choose_the_statement_its_own_predicate_type_does(tmp_path: Path) -> None:
    memory, client = registry()
    target = _target(memory, client)
    key = _key(tmp_path)
    digest = target.manifest.digest
    statement = intoto.statement(str(RP), digest, "https://example.org/other", {})
    body = dsse.seal(statement, key)
    layer = {"mediaType": dsse.MEDIA_TYPE, "digest": digest_of(body), "size": len(body),
             "annotations": {"dev.cosignproject.cosign/signature": "", "predicateType": SLSA}}  # fmt: skip
    cosign.append_layers(client, RP, att_tag(digest), None, [(layer, body)])
    found = cosign_att.find(client, RP, digest, SLSA, key.public())
    assert found.statement is None and found.problem == f"no {SLSA} attestation under {RP}:{att_tag(digest)}"
