"""A multi-platform image's index is signed itself (issue 19): publish_index signs the index digest with the team's
key before any alias names it, a rerun signs an index left unsigned, and verify-image checks the index's
signature before each platform's image. The real Registry and distribution client over an in-memory registry."""

from __future__ import annotations

from pathlib import Path

from registry_kit import MemoryRegistry
from test_trust_registry import FACTS, RP
from test_trust_sbom import INVENTORY
from trust_kit import HOST, REPO, registry, write_key

from builder.core.kinds import AliasStatus, Platform
from builder.oci.client import Distribution
from builder.oci.refs import parse_ref
from builder.pipeline.multiplatform import IndexResult, publish_index
from builder.pipeline.registry import Registry
from builder.render.tags import ImageTags
from builder.trust import cosign
from builder.trust.attest import Target, TrustSettings, attest
from builder.trust.inventory import parse_inventory
from builder.trust.keys import SigningKey, public_key, signing_key
from builder.trust.sbom import Subject
from builder.trust.verify import FAILED, PASSED, verify_image

MEMBERS = {Platform.AMD64: "t-amd64", Platform.ARM64: "t-arm64"}


def _members(memory: MemoryRegistry) -> None:
    memory.add_image(REPO, "t-amd64", arch="amd64")
    memory.add_image(REPO, "t-arm64", arch="arm64")


def _target(client: Distribution, tag: str) -> Target:
    manifest = client.manifest(RP, tag)
    assert manifest is not None
    subject = Subject(repo=str(RP), digest=manifest.digest, platform="linux/amd64", os_id="debian-12")
    return Target(
        client=client, repo=RP, manifest=manifest, subject=subject, contents=lambda: parse_inventory(INVENTORY)
    )


def _publish(client: Distribution, key: SigningKey | None, log: list[str], content: str = "h") -> IndexResult:
    tags = ImageTags("t", ("alias",))
    return publish_index(Registry(client=client), f"{HOST}/{REPO}", tags, MEMBERS, content, log.append, key=key)


def test_the_index_is_signed_before_its_alias_is_written(tmp_path: Path) -> None:
    memory, client = registry()
    _members(memory)
    log: list[str] = []
    done = _publish(client, signing_key(write_key(tmp_path), {}), log)
    assert done.status is AliasStatus.MOVED
    assert [line.split()[0] + " " + line.split()[1] for line in log] == [
        f"INDEX {HOST}/{REPO}:t",
        f"SIGN {HOST}/{REPO}:t",
        f"INDEX {HOST}/{REPO}:alias",
    ]
    index = client.manifest(RP, "alias")
    assert index is not None and index.is_index and index.digest == done.digest
    assert cosign.signed_by(client, RP, index.digest, public_key(tmp_path / "key.pem.pub")) is None
    other = write_key(tmp_path, "other.pem")
    assert "none made with this key" in str(
        cosign.signed_by(client, RP, index.digest, public_key(other.with_suffix(".pem.pub")))
    )


def test_a_rerun_signs_an_unchanged_index_that_was_left_unsigned(tmp_path: Path) -> None:
    memory, client = registry()
    _members(memory)
    first: list[str] = []
    _publish(client, None, first)
    assert not [line for line in first if line.startswith("SIGN")]
    again: list[str] = []
    done = _publish(client, signing_key(write_key(tmp_path), {}), again)
    assert done.status is AliasStatus.UNCHANGED
    assert [line.split()[0] for line in again] == ["SIGN", "SKIP"]
    index = client.manifest(RP, "t")
    assert index is not None
    assert cosign.signed_by(client, RP, index.digest, public_key(tmp_path / "key.pem.pub")) is None
    once_more: list[str] = []
    _publish(client, signing_key(tmp_path / "key.pem", {}), once_more)
    assert [line.split()[0] for line in once_more] == ["SKIP"]  # signed already: nothing written


def test_verify_image_checks_the_index_signature_then_each_platform(tmp_path: Path) -> None:
    memory, client = registry()
    key = signing_key(write_key(tmp_path), {})
    _members(memory)
    for tag in MEMBERS.values():  # each platform's image attested and signed, as the build does
        attest(_target(client, tag), TrustSettings(key=key), FACTS)
    _publish(client, key, [])
    public = public_key(tmp_path / "key.pem.pub")
    verdict = verify_image(client, parse_ref(f"{HOST}/{REPO}:t"), public)
    each = ["signature", "sbom", "sbom signature", "provenance", "provenance signature", "sbom attestation",
            "provenance attestation"]  # fmt: skip
    assert [(c.name, c.status) for c in verdict.checks] == [(n, PASSED) for n in ["index signature", *each, *each]]
    memory.add_image(REPO, "t-amd64", arch="amd64", labels={"rebuilt": "yes"})  # a rebuilt image, signed (an
    attest(_target(client, "t-amd64"), TrustSettings(key=key), FACTS)  # index listing the same images stays)
    _publish(client, None, [], content="another set")  # a new index under the tag, not signed
    verdict = verify_image(client, parse_ref(f"{HOST}/{REPO}:t"), public)
    assert [(c.name, c.status) for c in verdict.failed] == [("index signature", FAILED)]
    assert verdict.failed[0].detail.startswith("no signature: ")
