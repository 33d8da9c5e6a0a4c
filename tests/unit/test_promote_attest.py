"""`torchyard promote --attest [--sign-key]` (builder/trust/carry.py): the candidate's SBOM and provenance carried
to the public repository, the image and both signed there before the public tag is written; a candidate without
them, or a refused signature, leaves the tag unwritten and a rerun finishes the job. In-memory registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from http_kit import Answer, Net, Sent
from registry_kit import MemoryRegistry, tar_of
from test_trust_registry import FACTS
from test_trust_sbom import INVENTORY
from trust_kit import HOST, write_key

from builder.cli.main import main
from builder.core.errors import PushError
from builder.oci.client import Distribution
from builder.oci.promote import promote
from builder.oci.referrers import referrers
from builder.oci.refs import parse_ref, parse_repo
from builder.trust import cosign
from builder.trust.attest import Target, TrustSettings, attest
from builder.trust.carry import carry
from builder.trust.inventory import parse_inventory
from builder.trust.keys import SigningKey, public_key, signing_key
from builder.trust.sbom import Subject
from builder.trust.verify import PASSED, verify_image

CAND, PUB = parse_repo(f"{HOST}/team/cand"), parse_repo(f"{HOST}/team/pub")


class SigRefusing(MemoryRegistry):
    """A registry that refuses the upload of a signature (a `.sig` tag) while `refuse_sig` is set."""

    refuse_sig = True

    def _manifest(self, name: str, ref: str, sent: Sent) -> Answer:
        if sent.method == "PUT" and ref.endswith(".sig") and self.refuse_sig:
            return Answer(403, b"")
        return super()._manifest(name, ref, sent)


def _setup(kind: type[MemoryRegistry] = MemoryRegistry, *, api: bool = False) -> tuple[MemoryRegistry, Distribution]:
    net = Net()
    memory = kind(HOST, referrers_api=api).attach(net)
    return memory, Distribution(net.http(), docker_login=False)


def _attested(
    memory: MemoryRegistry, client: Distribution, tag: str, arch: str = "amd64", *, gzip: bool = False
) -> str:
    """A candidate image with an SBOM and provenance attached as `build --push --attest` does: unsigned (`gzip`:
    a real image, gzip layers and their diff_ids, which a zstd copy needs)."""
    if gzip:
        digest = memory.add_gzip_image("team/cand", tag, [tar_of("a", 700)], arch=arch)
    else:
        digest = memory.add_image("team/cand", tag, arch=arch, labels={"t": tag})
    manifest = client.manifest(CAND, digest)
    assert manifest is not None
    subject = Subject(repo=str(CAND), digest=digest, platform=f"linux/{arch}", os_id="debian-12")
    target = Target(client=client, repo=CAND, manifest=manifest, subject=subject,
                    contents=lambda: parse_inventory(INVENTORY))  # fmt: skip
    attest(target, TrustSettings(key=None), FACTS)
    return digest


def _key(tmp_path: Path) -> tuple[SigningKey, Path]:
    key = signing_key(write_key(tmp_path), {})
    assert key is not None
    return key, tmp_path / "key.pem.pub"


@pytest.mark.parametrize("api", [False, True], ids=["tag-fallback", "referrers-api"])
def test_the_promoted_image_carries_its_attestations_signed_in_the_public_repository(tmp_path: Path, api: bool) -> None:
    memory, client = _setup(api=api)
    _attested(memory, client, "t1")
    key, public = _key(tmp_path)
    done, before_tag = carry(client, CAND, PUB, key)
    result = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), None, before_tag)
    assert len(done.copied) == 2 and done.present == [] and len(done.signed) == 3 and done.attested == [result.digest]
    verdict = verify_image(client, parse_ref(f"{HOST}/team/pub:t1"), public_key(public))
    assert [c.status for c in verdict.checks] == [PASSED] * 7, verdict.as_json()
    assert result.digest in done.signed and "3 signature(s) written" in done.summary()
    # the candidate's own copies stay unsigned: a signature names its repository
    assert cosign.signed_by(client, CAND, result.digest, public_key(public)) is not None


def test_without_a_key_the_attestations_come_along_unsigned_and_the_summary_says_so() -> None:
    memory, client = _setup()
    digest = _attested(memory, client, "t1")
    done, before_tag = carry(client, CAND, PUB, None)
    promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), None, before_tag)
    assert len(referrers(client, PUB, digest)) == 2 and done.signed == []
    assert (
        done.summary() == "attestations: 2 copied, 0 already there; not signed (no --sign-key or $TORCHYARD_SIGN_KEY)"
    )


def test_a_candidate_without_attestations_is_not_promoted(tmp_path: Path) -> None:
    memory, client = _setup()
    memory.add_image("team/cand", "t1")
    _, before_tag = carry(client, CAND, PUB, _key(tmp_path)[0])
    with pytest.raises(PushError, match=r"team/cand@sha256:\w{12} has no SBOM attached: build it with --attest"):
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), None, before_tag)
    assert ("team/pub", "t1") not in memory.manifests


def test_a_refused_signature_leaves_the_tag_unwritten_and_a_rerun_finishes(tmp_path: Path) -> None:
    memory, client = _setup(SigRefusing)
    _attested(memory, client, "t1")
    key, public = _key(tmp_path)
    src, dst = parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1")
    with pytest.raises(PushError):
        promote(client, src, dst, None, carry(client, CAND, PUB, key)[1])
    assert ("team/pub", "t1") not in memory.manifests
    memory.refuse_sig = False  # type: ignore[attr-defined]
    done, before_tag = carry(client, CAND, PUB, key)
    promote(client, src, dst, None, before_tag)
    assert done.present and not done.copied  # the attestations were copied by the refused run
    assert [c.status for c in verify_image(client, dst, public_key(public)).checks] == [PASSED] * 7


def test_a_tag_promoted_without_attestations_gets_them_on_the_rerun(tmp_path: Path) -> None:
    memory, client = _setup()
    _attested(memory, client, "t1")
    key, public = _key(tmp_path)
    src, dst = parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1")
    promote(client, src, dst)
    done, before_tag = carry(client, CAND, PUB, key)
    assert promote(client, src, dst, None, before_tag).unchanged
    assert len(done.copied) == 2 and len(done.signed) == 3
    assert [c.status for c in verify_image(client, dst, public_key(public)).checks] == [PASSED] * 7


def test_an_index_is_signed_with_each_platform_image_and_its_attestations(tmp_path: Path) -> None:
    memory, client = _setup()
    amd, arm = _attested(memory, client, "amd"), _attested(memory, client, "arm", "arm64")
    index = memory.add_index("team/cand", "t1", {"linux/amd64": amd, "linux/arm64": arm})
    key, public = _key(tmp_path)
    done, before_tag = carry(client, CAND, PUB, key)
    promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), None, before_tag)
    assert done.signed[0] == index and len(done.signed) == 7 and len(done.copied) == 4
    assert cosign.signed_by(client, PUB, index, public_key(public)) is None
    checks = verify_image(client, parse_ref(f"{HOST}/team/pub:t1"), public_key(public)).checks
    assert [c.status for c in checks] == [PASSED] * 15 and checks[0].name == "index signature"  # then 7 per platform


def test_the_command_refuses_a_key_others_can_read_before_asking_the_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loose = write_key(tmp_path, "loose.pem", 0o644)
    with pytest.raises(SystemExit) as exit_:
        main(["promote", f"{HOST}/team/cand:t1", f"{HOST}/team/pub:t1", "--sign-key", str(loose)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--sign-key {loose}" in err and "BEGIN" not in err


def test_promote_zstd_with_a_key_signs_the_copy_before_its_tag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    net = Net()
    memory = MemoryRegistry(HOST).attach(net)
    _attested(memory, Distribution(net.http(), docker_login=False), "t1", gzip=True)
    import docker  # the SDK's APIClient subclasses requests.Session: imported before the fake replaces it

    assert docker
    monkeypatch.setattr("requests.Session", net.session)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    write_key(tmp_path)
    argv = ["promote", f"{HOST}/team/cand:t1", f"{HOST}/team/pub:t1", "--attest", "--zstd", "--json"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--sign-key", str(tmp_path / "key.pem")])
    assert exited.value.code in (0, None)
    copy = json.loads(capsys.readouterr().out)["zstd"]
    assert copy["signed"] == [copy["digest"]]
    client = Distribution(net.http(), docker_login=False)
    assert cosign.signed_by(client, PUB, copy["digest"], public_key(tmp_path / "key.pem.pub")) is None
