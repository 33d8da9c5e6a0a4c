"""`verify-image --sbom PATH --provenance PATH`: the documents it verified written byte for byte (and valid:
CycloneDX 1.6, an in-toto v1 statement with a SLSA v1 predicate), nothing written for an image that did not
verify, and the paths refused before any request; in-toto's and SLSA's structure checks themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_trust_registry import FACTS, RP, _target
from trust_kit import HOST, REPO, registry, write_key

from builder.cli.main import main
from builder.oci.client import Distribution
from builder.trust import intoto, slsa
from builder.trust.attest import TrustSettings, attest, read_attached
from builder.trust.keys import signing_key
from builder.trust.sbom import MEDIA_TYPE as SBOM_TYPE
from builder.trust.sbom import validate
from builder.trust.slsa import MEDIA_TYPE as PROVENANCE_TYPE

REF = f"{HOST}/{REPO}:t1"


def _signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, sign: bool = True) -> tuple[Distribution, str]:
    memory, client = registry()
    target = _target(memory, client)
    key = signing_key(write_key(tmp_path), {})
    if sign:
        attest(target, TrustSettings(key=key), FACTS)
    monkeypatch.setattr("builder.oci.client.Distribution", lambda **_: client)
    return client, target.manifest.digest


def _run(*argv: str) -> int:
    with pytest.raises(SystemExit) as caught:
        main(["verify-image", REF, *argv])
    return int(caught.value.code or 0)


def test_the_verified_documents_are_written_as_attached_and_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, digest = _signed(tmp_path, monkeypatch)
    sbom_path, provenance_path = tmp_path / "out" / "sbom.json", tmp_path / "provenance.json"
    code = _run("--key", str(tmp_path / "key.pem.pub"), "--sbom", str(sbom_path), "--provenance", str(provenance_path))
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert f"wrote {sbom_path}" in out and f"wrote {provenance_path}" in out
    assert sbom_path.read_bytes() == read_attached(client, RP, digest, SBOM_TYPE)[1]  # type: ignore[index]
    assert provenance_path.read_bytes() == read_attached(client, RP, digest, PROVENANCE_TYPE)[1]  # type: ignore[index]
    validate(sbom_path.read_text())  # CycloneDX 1.6, strict
    statement = json.loads(provenance_path.read_text())
    assert intoto.problem(statement) is None and slsa.problem(statement["predicate"]) is None
    assert intoto.subject_digests(statement) == [digest]
    assert json.loads(sbom_path.read_text())["metadata"]["component"]["version"] == digest


def test_an_image_that_does_not_verify_gets_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _signed(tmp_path, monkeypatch, sign=False)
    sbom_path = tmp_path / "sbom.json"
    assert _run("--key", str(tmp_path / "key.pem.pub"), "--sbom", str(sbom_path)) == 4
    assert not sbom_path.exists() and list(tmp_path.iterdir()) == sorted(tmp_path.iterdir())
    assert "refused" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sbom", "{tmp}/s.json"], "--sbom: needs --key PUB"),
        (["--key", "{tmp}/key.pem.pub", "--provenance", "{tmp}/folder"], "{tmp}/folder' is a directory"),
        (["--key", "{tmp}/key.pem.pub", "--sbom", "{tmp}/a.json", "--provenance", "{tmp}/a.json"], "both name"),
        (["--key", "{tmp}/key.pem.pub", "--sbom", "{tmp}/file/s.json"], "--sbom {tmp}/file/s.json:"),
    ],
)
def test_a_path_that_cannot_be_written_is_one_line_exit_2_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    flags: list[str], message: str,
) -> None:  # fmt: skip
    write_key(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("")
    asked: list[str] = []
    monkeypatch.setattr("builder.oci.client.Distribution", lambda **_: asked.append("client"))
    assert _run(*(f.format(tmp=tmp_path) for f in flags)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message.format(tmp=tmp_path) in err
    assert asked == []


def test_an_in_toto_statement_is_checked_for_its_structure() -> None:
    good = json.loads(intoto.statement("r", "sha256:" + "a" * 64, slsa.PREDICATE_TYPE, {"x": 1}))
    assert intoto.problem(good) is None
    assert intoto.problem(good | {"_type": "https://in-toto.io/Statement/v0.1"}) is not None
    assert intoto.problem(good | {"subject": []}) == "no subject"
    assert "digest" in (intoto.problem(good | {"subject": [{"name": "r", "digest": {"sha256": "XYZ"}}]}) or "")
    assert intoto.problem(good | {"predicateType": ""}) == "no predicateType"
    assert intoto.problem(good | {"predicate": [1]}) == "a predicate that is not an object"
    assert slsa.problem({"x": 1}) == "no buildDefinition.buildType"
    predicate = json.loads(slsa.make_statement("r", "sha256:" + "a" * 64, FACTS, None))["predicate"]
    assert slsa.problem(predicate) is None
    assert slsa.problem(predicate | {"runDetails": {"builder": {}}}) == "no runDetails.builder.id"


def test_documents_of_an_index_are_not_written_to_one_path(tmp_path: Path) -> None:
    from builder.core.errors import UsageError
    from builder.trust.verify import Verdict, write_documents

    verdict = Verdict("r:t", documents={("sha256:a", "sbom"): b"{}", ("sha256:b", "sbom"): b"{}"})
    with pytest.raises(UsageError, match="an index of 2 images"):
        write_documents(verdict, {"sbom": tmp_path / "s.json"})
    assert list(tmp_path.iterdir()) == []
