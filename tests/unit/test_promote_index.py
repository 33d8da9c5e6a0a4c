"""Registry-side promotion (builder/oci/promote.py) and multi-platform index writing (builder/oci/index.py)
against an in-memory registry: what is mounted, uploaded or left alone, what is refused, and what the
`torchyard promote` command says."""

from __future__ import annotations

import json

import pytest
from http_kit import Net
from registry_kit import MemoryRegistry

import builder.pipeline.plan
from builder.cli.main import main
from builder.core.errors import PushError, UsageError
from builder.oci import promote as promote_module
from builder.oci.client import OCI_INDEX, Distribution
from builder.oci.index import IndexEntry, index_bytes, write_index
from builder.oci.promote import promote
from builder.oci.refs import parse_ref, parse_repo

HOST = "127.0.0.1:5000"
HASH = "ab" * 32


def setup(other: str | None = None) -> tuple[Net, MemoryRegistry, Distribution]:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    if other:
        MemoryRegistry(other).attach(net)
    return net, registry, Distribution(net.http(), docker_login=False)


def test_the_label_promote_checks_is_the_one_the_plan_writes() -> None:
    assert promote_module.CONTENT_LABEL == builder.pipeline.plan.CONTENT_LABEL


def test_promote_mounts_blobs_and_puts_the_same_manifest() -> None:
    _, registry, client = setup()
    digest = registry.add_image("team/cand", "t1", labels={"io.torchyard.content-hash": HASH})
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert (done.digest, done.mounted, done.present, done.copied, done.unchanged) == (digest, 2, 0, 0, False)
    assert registry.manifests["team/pub", "t1"] == registry.manifests["team/cand", "t1"]
    assert {m[0] for m in registry.mounts} == {"team/cand"} and registry.uploads == []
    assert done.platforms == ["linux/amd64"]
    assert "2 blobs mounted, 0 already there, 0 copied (0 bytes)" in done.summary()


def test_promote_again_is_unchanged_and_blobs_already_there_are_left_alone() -> None:
    _, registry, client = setup()
    registry.add_image("team/cand", "t1")
    promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    again = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    assert again.unchanged and "nothing to do" in again.summary()
    other_tag = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t2"))
    assert (other_tag.present, other_tag.mounted) == (2, 0)


def test_a_registry_that_will_not_mount_gets_the_blobs_uploaded_where_it_said() -> None:
    _, registry, client = setup()
    registry.mountable = False
    registry.add_image("team/cand", "t1")
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))
    assert (done.mounted, done.copied) == (0, 2)
    assert done.bytes_copied == sum(len(registry.blobs["team/cand", d]) for _, d in registry.uploads)
    assert registry.manifests["team/pub", "t1"] == registry.manifests["team/cand", "t1"]


def test_promote_between_registries_copies() -> None:
    _, registry, client = setup(other="127.0.0.1:5001")
    registry.add_image("team/cand", "t1")
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref("127.0.0.1:5001/team/pub:t1"))
    assert (done.mounted, done.copied) == (0, 2)


def test_promote_an_index_with_every_platform_image() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/cand", "amd", labels={"io.torchyard.content-hash": HASH})
    arm = registry.add_image("team/cand", "arm", arch="arm64", labels={"io.torchyard.content-hash": HASH})
    index = registry.add_index("team/cand", "t1", {"linux/amd64": amd, "linux/arm64": arm})
    done = promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert (done.digest, done.platforms, done.mounted) == (index, ["linux/amd64", "linux/arm64"], 4)
    assert ("team/pub", amd) in registry.manifests and ("team/pub", arm) in registry.manifests


def test_a_candidate_with_other_content_promotes_nothing() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/cand", "amd", labels={"io.torchyard.content-hash": HASH})
    arm = registry.add_image("team/cand", "arm", arch="arm64", labels={"io.torchyard.content-hash": "cd" * 32})
    registry.add_index("team/cand", "t1", {"linux/amd64": amd, "linux/arm64": arm})
    with pytest.raises(PushError, match=r"\(linux/arm64\) carries content hash (cd){32}, not (ab){32}"):
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"), HASH)
    assert not [key for key in registry.manifests if key[0] == "team/pub"]


def test_a_missing_source_is_one_line() -> None:
    _, _, client = setup()
    with pytest.raises(PushError, match=r"^127\.0\.0\.1:5000/team/cand:t1 does not exist: nothing to promote$"):
        promote(client, parse_ref(f"{HOST}/team/cand:t1"), parse_ref(f"{HOST}/team/pub:t1"))


# --- index -------------------------------------------------------------------------------------------------


def test_write_index_lists_the_platforms_sorted_and_is_written_once() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/img", "amd")
    arm = registry.add_image("team/img", "arm", arch="arm64")
    where = parse_repo(f"{HOST}/team/img")
    written = write_index(client, where, "2.14.1", [IndexEntry(arm, "linux/arm64/v8"), IndexEntry(amd, "linux/amd64")])
    raw, media = registry.manifests["team/img", "2.14.1"]
    index = json.loads(raw)
    assert (media, index["mediaType"], written.changed) == (OCI_INDEX, OCI_INDEX, True)
    assert [(e["digest"], e["platform"]) for e in index["manifests"]] == [
        (amd, {"architecture": "amd64", "os": "linux"}),
        (arm, {"architecture": "arm64", "os": "linux"}),
    ]
    assert all(e["size"] == len(registry.manifests["team/img", e["digest"]][0]) for e in index["manifests"])
    again = write_index(client, where, "2.14.1", [IndexEntry(amd, "linux/amd64"), IndexEntry(arm, "linux/arm64")])
    assert (again.digest, again.changed) == (written.digest, False)
    assert client.platforms(where, "2.14.1") == {"linux/amd64": amd, "linux/arm64": arm}


def test_index_bytes_are_deterministic_and_carry_annotations() -> None:
    a = {"digest": "sha256:1", "platform": {"os": "linux", "architecture": "arm64"}}
    b = {"digest": "sha256:2", "platform": {"os": "linux", "architecture": "amd64"}}
    assert index_bytes([a, b]) == index_bytes([b, a])
    assert json.loads(index_bytes([a], {"org.opencontainers.image.version": "2.14.1"}))["annotations"] == {
        "org.opencontainers.image.version": "2.14.1"
    }


def test_write_index_refuses_what_is_not_a_platform_image_of_that_platform() -> None:
    _, registry, client = setup()
    amd = registry.add_image("team/img", "amd")
    nested = registry.add_index("team/img", "idx", {"linux/amd64": amd})
    where = parse_repo(f"{HOST}/team/img")
    cases = [
        ([IndexEntry(amd, "linux/arm64")], UsageError, r"is a linux/amd64 image, not linux/arm64$"),
        ([IndexEntry(nested, "linux/amd64")], UsageError, r"is an index itself"),
        ([IndexEntry("sha256:" + "0" * 64, "linux/amd64")], PushError, r"does not exist: push the linux/amd64 image"),
        ([IndexEntry(amd, "linux/amd64"), IndexEntry(amd, "linux/amd64")], UsageError, r"each platform once"),
        ([], UsageError, r"at least one platform manifest"),
        ([IndexEntry(amd, "amd64")], UsageError, r"expected os/architecture"),
    ]
    for entries, error, message in cases:
        with pytest.raises(error, match=message):
            write_index(client, where, "t", entries)
    assert ("team/img", "t") not in registry.manifests


# --- the command -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a:1", "127.0.0.1:5000/team/b"], "DST '127.0.0.1:5000/team/b': name a tag (repo:tag) to promote to"),
        (["a:1", "b:2", "--content-hash", "xyz"], "--content-hash 'xyz': expected 64 lower-case hex digits"),
        (["Bad:1", "b:2"], "SRC 'Bad:1': bad repository name 'library/Bad'"),
    ],
)
def test_the_promote_command_refuses_bad_input_with_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["promote", *argv])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"torchyard: error: {message}\n"
