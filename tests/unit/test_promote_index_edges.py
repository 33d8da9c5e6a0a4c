"""Registry-side promotion and index writing where a wrong change went unnoticed (issue 24: mutation testing left
these unheld by test_promote_index.py): the exact bytes of an index, the lines a refusal prints, what a promotion
reports, the manifests of an index PUT under their digests, images without a config (attestations), the scopes a
blob check asks for and the upload place a refused mount opened; and platforms with a variant."""

from __future__ import annotations

import json

import pytest
from http_kit import Net
from registry_kit import MemoryRegistry, ScopedRegistry

from builder.core.errors import PushError, UsageError
from builder.oci.client import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, Distribution, digest_of
from builder.oci.index import IndexEntry, index_bytes, write_index
from builder.oci.promote import promote
from builder.oci.refs import parse_ref, parse_repo, platform_fields, platform_of
from builder.oci.upload import UploadPolicy

HOST = "127.0.0.1:5000"
HASH = "ab" * 32
LABEL = {"io.torchyard.content-hash": HASH}


def setup(other: str | None = None, uploads: UploadPolicy | None = None) -> tuple[Net, MemoryRegistry, Distribution]:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    if other:
        MemoryRegistry(other).attach(net)
    return net, registry, Distribution(net.http(), docker_login=False, uploads=uploads)


def add_bare(registry: MemoryRegistry, name: str) -> str:
    """An image manifest without a config (as an attestation can be): no platform to read."""
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
    registry.manifests[name, digest_of(raw)] = (raw, OCI_MANIFEST)
    return digest_of(raw)


def add_index(registry: MemoryRegistry, name: str, tag: str, digests: list[str]) -> str:
    """An index of the given manifests in this order, without platforms (promote reads them from the configs)."""
    entries = [{"mediaType": OCI_MANIFEST, "digest": d, "size": len(registry.manifests[name, d][0])} for d in digests]
    raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    registry.manifests[name, tag] = registry.manifests[name, digest_of(raw)] = (raw, OCI_INDEX)
    return digest_of(raw)


# --- index -------------------------------------------------------------------------------------------------


def test_an_index_s_bytes_are_fixed_so_one_written_by_an_earlier_run_is_recognised() -> None:
    """Sorted by the platform's fields in key order, keys sorted, no spaces: the digest of a set of platforms
    does not depend on the order given nor on the order of a dict's keys."""
    windows = {"mediaType": OCI_MANIFEST, "digest": "sha256:1", "size": 1, "platform": {"os": "windows", "architecture": "amd64"}}  # fmt: skip  # noqa: E501
    linux = {"mediaType": OCI_MANIFEST, "digest": "sha256:2", "size": 2, "platform": {"os": "linux", "architecture": "arm64"}}  # fmt: skip  # noqa: E501
    expected = (
        '{"annotations":{"a":"1","b":"2"},"manifests":['
        f'{{"digest":"sha256:1","mediaType":"{OCI_MANIFEST}","platform":{{"architecture":"amd64","os":"windows"}},"size":1}},'
        f'{{"digest":"sha256:2","mediaType":"{OCI_MANIFEST}","platform":{{"architecture":"arm64","os":"linux"}},"size":2}}],'
        f'"mediaType":"{OCI_INDEX}","schemaVersion":2}}'
    )
    assert index_bytes([linux, windows], {"b": "2", "a": "1"}).decode() == expected


def test_write_index_says_which_rule_a_set_of_entries_breaks() -> None:
    _, registry, client = setup()
    arm = registry.add_image("team/img", "arm", arch="arm64")
    where = parse_repo(f"{HOST}/team/img")
    with pytest.raises(UsageError) as empty:
        write_index(client, where, "t", [])
    assert str(empty.value) == "an image index needs at least one platform manifest"
    with pytest.raises(UsageError) as twice:  # arm64/v8 is arm64
        write_index(client, where, "t", [IndexEntry(arm, "linux/arm64/v8"), IndexEntry(arm, "linux/arm64")])
    assert str(twice.value) == "an image index lists each platform once: linux/arm64, linux/arm64"


def test_the_index_written_carries_its_annotations_and_each_manifest_s_media_type() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/img", "amd")
    where = parse_repo(f"{HOST}/team/img")
    write_index(client, where, "t", [IndexEntry(amd, "linux/amd64")], annotations={"org.example.v": "1"})
    index = json.loads(registry.manifests["team/img", "t"][0])
    assert index["annotations"] == {"org.example.v": "1"}
    assert [(e["mediaType"], e["digest"]) for e in index["manifests"]] == [(DOCKER_MANIFEST, amd)]


def test_an_entry_without_a_config_is_refused_for_its_platform_without_asking_for_a_blob() -> None:
    net, registry, client = setup()
    bare = add_bare(registry, "team/img")
    with pytest.raises(UsageError, match=r"is a / image, not linux/amd64$"):
        write_index(client, parse_repo(f"{HOST}/team/img"), "t", [IndexEntry(bare, "linux/amd64")])
    assert [s.url for s in net.sent if "/blobs/" in s.url] == []


# --- promote -----------------------------------------------------------------------------------------------


def test_a_promotion_names_its_source_and_target_and_counts_no_bytes_for_blobs_already_there() -> None:
    _, registry, client = setup()
    registry.add_image("team/cand", "t1")
    first = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    assert (first.source, first.target) == (f"{HOST}/team/cand:t1", f"{HOST}/team/pub:t1")
    assert first.summary().startswith(f"promoted {HOST}/team/cand:t1 -> {HOST}/team/pub:t1 (sha256:")
    again = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t2"))
    assert (again.present, again.bytes_copied) == (2, 0)


def test_a_candidate_without_the_label_is_named_with_the_whole_reason() -> None:
    _, registry, client = setup()
    registry.add_image("team/cand", "t1")
    with pytest.raises(PushError) as raised:
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert str(raised.value) == (
        f"{HOST}/team/cand:t1 (linux/amd64) carries content hash none, not {HASH}: "
        "it is not the image that was verified; nothing promoted"
    )


def test_an_index_s_manifests_are_put_under_their_digests_with_their_media_types() -> None:
    net, registry, client = setup()
    amd = registry.add_image("team/cand", "amd")
    arm = registry.add_image("team/cand", "arm", arch="arm64")
    index = registry.add_index("team/cand", "t1", {"linux/amd64": amd, "linux/arm64": arm})
    promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    puts = [(s.path.rsplit("/", 1)[1], s.headers["Content-Type"]) for s in net.sent if s.method == "PUT"]
    assert sorted(puts[:2]) == sorted([(amd, DOCKER_MANIFEST), (arm, DOCKER_MANIFEST)])
    assert (
        puts[2:] == [("t1", OCI_INDEX)]
        and registry.manifests["team/pub", "t1"][0] == (registry.manifests["team/cand", index][0])
    )


def test_an_index_entry_the_registry_lacks_is_named() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/cand", "amd")
    index = json.loads(registry.manifests["team/cand", registry.add_index("team/cand", "t1", {"linux/amd64": amd})][0])
    del registry.manifests["team/cand", amd]
    with pytest.raises(PushError) as raised:
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    assert str(raised.value) == f"{HOST}/team/cand@{index['manifests'][0]['digest']} is listed in the index but missing"


def test_a_manifest_without_a_config_is_promoted_as_unknown_and_skipped_by_the_content_check() -> None:
    net, registry, client = setup()
    bare = add_bare(registry, "team/cand")
    amd = registry.add_image("team/cand", "amd", labels=LABEL)
    add_index(registry, "team/cand", "t1", [bare, amd])
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert done.platforms == ["linux/amd64", "unknown/unknown"]
    assert ("team/pub", bare) in registry.manifests
    assert [s.url for s in net.sent if s.url.endswith("/blobs/None")] == []


def test_the_content_check_goes_on_past_an_unknown_platform() -> None:
    _, registry, client = setup()
    bare = add_bare(registry, "team/cand")
    arm = registry.add_image("team/cand", "arm", arch="arm64", labels={"io.torchyard.content-hash": "cd" * 32})
    add_index(registry, "team/cand", "t1", [bare, arm])
    with pytest.raises(PushError, match=r"\(linux/arm64\) carries content hash (cd){32}"):
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert not [key for key in registry.manifests if key[0] == "team/pub"]


def test_the_target_s_blobs_are_checked_with_the_push_scope_the_upload_needs_anyway() -> None:
    """A token for pull alone on a repository that does not exist yet is refused by some registries (Docker
    Hub); the check asks for pull,push, which the promotion needs in any case."""
    registry = MemoryRegistry(HOST)
    net = Net()
    ScopedRegistry(net, registry)  # the token names the scopes it was asked for
    registry.add_image("team/cand", "t1")
    client = Distribution(net.http(), docker_login=False)
    promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    heads = [s for s in net.sent if s.method == "HEAD" and "/team/pub/blobs/" in s.url]
    assert {s.bearer for s in heads if s.bearer} == {"repository:team/pub:pull,push"}


def test_a_refused_mount_uploads_into_the_place_the_registry_opened_not_a_new_one() -> None:
    net, registry, client = setup()
    registry.mountable = False
    registry.add_image("team/cand", "t1")
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    posts = [s for s in net.sent if s.method == "POST"]
    assert done.copied == 2 and len(posts) == 2 and all("mount=" in s.url for s in posts)


def test_a_copy_between_registries_in_chunks_opens_its_own_upload() -> None:
    net, registry, client = setup(other="127.0.0.1:5001", uploads=UploadPolicy(chunk=256, backoff=0.0))
    registry.add_image("team/cand", "t1")
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref("127.0.0.1:5001/team/pub:t1"))
    assert (done.copied, done.mounted) == (2, 0)
    assert [s for s in net.sent if s.method == "PATCH"] and all(s.url.startswith("http://") for s in net.sent)


# --- platforms ---------------------------------------------------------------------------------------------


def test_a_platform_with_a_variant_keeps_it_and_arm64_v8_is_arm64() -> None:
    assert platform_fields("linux/arm/v7") == {"os": "linux", "architecture": "arm", "variant": "v7"}
    assert platform_fields("linux/arm64/v8") == {"os": "linux", "architecture": "arm64"}
    with pytest.raises(UsageError, match="expected os/architecture"):
        platform_fields("linux/arm/v7/x")


def test_a_config_that_names_no_os_or_architecture_reads_as_an_empty_part() -> None:
    assert platform_of({"architecture": "amd64"}) == "/amd64"
    assert platform_of({"os": "linux"}) == "linux/"


# --- references --------------------------------------------------------------------------------------------


def test_a_reference_prints_as_it_was_given() -> None:
    digest = "sha256:" + "a" * 64
    for text in (f"{HOST}/team/img@{digest}", f"{HOST}/team/img:t@{digest}", f"{HOST}/team/img:t", f"{HOST}/team/img"):
        assert str(parse_ref(text)) == text


def test_a_name_without_a_tag_is_not_cut_and_a_colon_before_the_last_slash_is_not_a_tag() -> None:
    plain = parse_ref("debian")
    assert (plain.repo.name, plain.tag) == ("library/debian", None)
    with pytest.raises(UsageError) as raised:
        parse_ref("team/img:x/y")
    assert str(raised.value) == "image 'team/img:x/y': bad repository name 'team/img:x/y'"
