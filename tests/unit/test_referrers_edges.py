"""builder/oci/referrers.py held byte for byte (issue 24: mutation testing left these unheld): the artifact
manifest and the fallback index as the OCI spec lays them out (canonical JSON, every key and value), where
they are written and with which Content-Type, what `Attached` says was written, the blob checks made with a
push token, an artifact listed once, and `artifact_content` for a manifest that is missing, names another
subject, or has other than one layer."""

from __future__ import annotations

import json

import pytest
from http_kit import Net, Sent
from registry_kit import MemoryRegistry, ScopedRegistry

from builder.oci.client import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, Distribution, Manifest, digest_of
from builder.oci.referrers import Attached, artifact_content, attach, descriptor, put_referrer
from builder.oci.refs import RepoRef

HOST = "127.0.0.1:5000"
NAME = "team/torch"
REPO = RepoRef(HOST, NAME)
KIND = "application/vnd.example.sbom+json"
CONTENT = b'{"a": 1}'
EMPTY_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256 of b"{}"


def _setup(*, api: bool = False) -> tuple[Net, MemoryRegistry, Distribution, Manifest]:
    net = Net()
    memory = MemoryRegistry(HOST, referrers_api=api).attach(net)
    return net, memory, Distribution(net.http(), docker_login=False), _subject(memory)


def _subject(memory: MemoryRegistry) -> Manifest:
    digest = memory.add_image(NAME, "t1")
    raw = memory.manifests[NAME, "t1"][0]
    return Manifest(DOCKER_MANIFEST, digest, raw, json.loads(raw))


def _artifact_text(subject: Manifest, annotations: str = '{"a":"1","z":"2"}') -> bytes:
    """The artifact manifest attach writes, spelt out: keys sorted, no spaces."""
    return (
        f'{{"annotations":{annotations},"artifactType":"{KIND}",'
        f'"config":{{"digest":"{EMPTY_DIGEST}","mediaType":"application/vnd.oci.empty.v1+json","size":2}},'
        f'"layers":[{{"digest":"{digest_of(CONTENT)}","mediaType":"{KIND}","size":8}}],'
        f'"mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2,'
        f'"subject":{{"digest":"{subject.digest}","mediaType":"{DOCKER_MANIFEST}","size":{len(subject.raw)}}}}}'
    ).encode()


def _index_text(*entries: str) -> bytes:
    return (
        f'{{"manifests":[{",".join(entries)}],"mediaType":"application/vnd.oci.image.index.v1+json","schemaVersion":2}}'
    ).encode()


def _entry_text(raw: bytes, annotations: str = '{"a":"1","z":"2"}') -> str:
    return (
        f'{{"annotations":{annotations},"artifactType":"{KIND}","digest":"{digest_of(raw)}",'
        f'"mediaType":"application/vnd.oci.image.manifest.v1+json","size":{len(raw)}}}'
    )


def _puts(net: Net) -> list[Sent]:
    return [s for s in net.sent if s.method == "PUT" and "/manifests/" in s.path]


def _fallback_tag(subject: Manifest) -> str:
    return "sha256-" + subject.digest.removeprefix("sha256:")


def test_a_descriptor_names_a_manifest_by_media_type_digest_and_size() -> None:
    manifest = Manifest("application/x-kind", "sha256:" + "e" * 64, b"12345", {})
    assert descriptor(manifest) == {"mediaType": "application/x-kind", "digest": "sha256:" + "e" * 64, "size": 5}


def test_an_artifact_manifest_is_written_in_canonical_json_under_its_digest() -> None:
    net, memory, client, subject = _setup(api=True)
    done = attach(client, REPO, subject, KIND, CONTENT, {"z": "2", "a": "1"})
    expected = _artifact_text(subject)
    [put] = _puts(net)
    assert put.body == expected
    assert put.path == f"/v2/{NAME}/manifests/{digest_of(expected)}"
    assert put.headers["Content-Type"] == OCI_MANIFEST
    assert done == Attached(digest_of(expected), fallback=False, bytes=len(CONTENT) + len(expected))
    assert memory.blobs[NAME, EMPTY_DIGEST] == b"{}" and memory.blobs[NAME, digest_of(CONTENT)] == CONTENT


def test_without_the_referrers_api_the_fallback_index_lists_the_artifact_byte_for_byte() -> None:
    net, memory, client, subject = _setup()
    done = attach(client, REPO, subject, KIND, CONTENT, {"z": "2", "a": "1"})
    artifact = _artifact_text(subject)
    index = _index_text(_entry_text(artifact))
    first, second = _puts(net)
    assert (first.path, first.body) == (f"/v2/{NAME}/manifests/{digest_of(artifact)}", artifact)
    assert (second.path, second.body) == (f"/v2/{NAME}/manifests/{_fallback_tag(subject)}", index)
    assert second.headers["Content-Type"] == OCI_INDEX
    assert memory.manifests[NAME, _fallback_tag(subject)] == (index, OCI_INDEX)
    assert done == Attached(digest_of(artifact), fallback=True, bytes=len(CONTENT) + len(artifact) + len(index))


def test_an_artifact_already_listed_and_uploaded_is_written_once_more_and_nothing_else() -> None:
    net, _, client, subject = _setup()
    attach(client, REPO, subject, KIND, CONTENT, {"z": "2", "a": "1"})
    before = len(net.sent)
    again = attach(client, REPO, subject, KIND, CONTENT, {"z": "2", "a": "1"})
    artifact = _artifact_text(subject)
    assert again == Attached(digest_of(artifact), fallback=True, bytes=len(CONTENT) + len(artifact))
    blobs = f"http://{HOST}/v2/{NAME}/blobs"
    assert [(s.method, s.url) for s in net.sent[before:]] == [
        ("HEAD", f"{blobs}/{EMPTY_DIGEST}"),
        ("HEAD", f"{blobs}/{digest_of(CONTENT)}"),
        ("PUT", f"http://{HOST}/v2/{NAME}/manifests/{digest_of(artifact)}"),
        ("GET", f"http://{HOST}/v2/{NAME}/manifests/{_fallback_tag(subject)}"),
    ]


def test_a_new_artifact_is_added_after_those_the_fallback_index_lists() -> None:
    net, memory, client, subject = _setup()
    listed = '{"digest":"sha256:' + "0" * 64 + '","mediaType":"x","size":1}'
    memory.manifests[NAME, _fallback_tag(subject)] = (_index_text(listed), OCI_INDEX)
    attach(client, REPO, subject, KIND, CONTENT, {"z": "2", "a": "1"})
    assert _puts(net)[-1].body == _index_text(listed, _entry_text(_artifact_text(subject)))


@pytest.mark.parametrize(
    ("annotations", "listed"), [(None, "{}"), ({}, "{}"), ({"q": "w"}, '{"q":"w"}')], ids=["none", "empty", "one"]
)
def test_put_referrer_lists_the_manifests_annotations_or_an_empty_object(
    annotations: dict[str, str] | None, listed: str
) -> None:
    net, _, client, subject = _setup()
    manifest: dict[str, object] = {"schemaVersion": 2, "artifactType": KIND, "subject": descriptor(subject)}
    if annotations is not None:
        manifest["annotations"] = annotations
    raw = json.dumps(manifest).encode()  # spaces and key order kept: written byte for byte
    done = put_referrer(client, REPO, subject.digest, raw)
    first, second = _puts(net)
    assert (first.path, first.body) == (f"/v2/{NAME}/manifests/{digest_of(raw)}", raw)
    index = _index_text(_entry_text(raw, listed))
    assert second.body == index
    assert done == Attached(digest_of(raw), fallback=True, bytes=len(raw) + len(index))


def test_put_referrer_on_a_registry_that_took_the_subject_writes_no_index() -> None:
    net, _, client, subject = _setup(api=True)
    raw = _artifact_text(subject)
    assert put_referrer(client, REPO, subject.digest, raw) == Attached(digest_of(raw), fallback=False, bytes=len(raw))
    assert [s.path for s in _puts(net)] == [f"/v2/{NAME}/manifests/{digest_of(raw)}"]


def test_the_blobs_are_looked_for_with_the_push_token_the_upload_needs() -> None:
    net = Net()
    memory = MemoryRegistry(HOST)
    scoped = ScopedRegistry(net, memory)
    memory.blobs[NAME, EMPTY_DIGEST] = b"{}"
    memory.blobs[NAME, digest_of(CONTENT)] = CONTENT
    subject = _subject(memory)
    attach(Distribution(net.http(), docker_login=False), REPO, subject, KIND, CONTENT, {})
    push, pull = f"repository:{NAME}:pull,push", f"repository:{NAME}:pull"
    assert scoped.asked == [(push,), (pull,)]  # push for the HEADs and the PUTs, pull to read the fallback tag
    heads = [s for s in net.sent if s.method == "HEAD"]
    assert [(s.path, s.bearer) for s in heads] == [
        (f"/v2/{NAME}/blobs/{EMPTY_DIGEST}", None),  # the first contact, answered by a challenge
        (f"/v2/{NAME}/blobs/{EMPTY_DIGEST}", push),
        (f"/v2/{NAME}/blobs/{digest_of(CONTENT)}", push),
    ]
    assert memory.uploads == []


def _artifact(memory: MemoryRegistry, subject: str, layers: list[bytes]) -> str:
    for layer in layers:
        memory.blobs[NAME, digest_of(layer)] = layer
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "subject": {"mediaType": DOCKER_MANIFEST, "digest": subject, "size": 1},
        "layers": [{"mediaType": KIND, "digest": digest_of(layer), "size": len(layer)} for layer in layers],
    }
    raw = json.dumps(manifest).encode()
    memory.manifests[NAME, digest_of(raw)] = (raw, OCI_MANIFEST)
    return digest_of(raw)


def test_artifact_content_is_the_one_layer_of_a_manifest_naming_the_subject() -> None:
    _, memory, client, subject = _setup()
    digest = _artifact(memory, subject.digest, [CONTENT])
    assert artifact_content(client, REPO, digest, subject.digest) == CONTENT


def test_artifact_content_of_a_manifest_the_registry_does_not_have_is_none() -> None:
    _, _, client, subject = _setup()
    assert artifact_content(client, REPO, "sha256:" + "f" * 64, subject.digest) is None


def test_artifact_content_of_a_manifest_naming_another_subject_is_none() -> None:
    _, memory, client, subject = _setup()
    digest = _artifact(memory, "sha256:" + "b" * 64, [CONTENT])
    assert artifact_content(client, REPO, digest, subject.digest) is None


@pytest.mark.parametrize("layers", [[], [CONTENT, b"second"]], ids=["no-layer", "two-layers"])
def test_artifact_content_of_a_manifest_without_exactly_one_layer_is_none(layers: list[bytes]) -> None:
    net, memory, client, subject = _setup()
    digest = _artifact(memory, subject.digest, layers)
    assert artifact_content(client, REPO, digest, subject.digest) is None
    assert [s.method for s in net.sent] == ["GET"]  # the manifest only: no blob is read
