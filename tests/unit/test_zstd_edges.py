"""The zstd copy of an image (builder/oci/zstd.py) at its edges: the exact manifest and index written (canonical
JSON, schemaVersion 2, the source's annotations kept, sizes of what was written), the tag length bound, the copy
of an alias's tag reused, what a signer is shown and where the copy is by then, layers kept or refused, the
bytes counted, and each refusal's one line. Written for the survivors of `bench/mutation.py oci`
(docs/mutation.md)."""

from __future__ import annotations

import gzip
import json
import random
import tempfile
from typing import IO, Any

import pytest
import zstandard
from http_kit import Answer, Net, Sent
from registry_kit import DOCKER_CONFIG, GZIP_LAYER, MemoryRegistry, ScopedRegistry, tar_of

from builder.core.errors import PushError, UsageError
from builder.oci import zstd
from builder.oci.client import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST, Distribution, digest_of
from builder.oci.refs import parse_ref
from builder.oci.upload import UploadPolicy
from builder.oci.zstd import MADE_FROM, ZSTD_LAYER, zstd_copy, zstd_tag

HOST = "127.0.0.1:5999"
NAME = "team/torch"
REPO = f"{HOST}/{NAME}"
OCI_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


def _setup(net: Net | None = None) -> tuple[Net, MemoryRegistry, Distribution]:
    net = net or Net()
    registry = MemoryRegistry(HOST).attach(net)
    return net, registry, Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=4096))


def _canonical(data: dict[str, Any]) -> bytes:
    """What the copy writes: sorted keys, no spaces (the same source gives the same bytes, so the same digest)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _blob(registry: MemoryRegistry, blob: bytes) -> str:
    registry.blobs[NAME, digest_of(blob)] = blob
    return digest_of(blob)


def _gzip_layer(registry: MemoryRegistry, tar: bytes, media: str = GZIP_LAYER) -> dict[str, Any]:
    blob = gzip.compress(tar, mtime=0)
    return {"mediaType": media, "digest": _blob(registry, blob), "size": len(blob)}


def _config(registry: MemoryRegistry, diff_ids: list[str], platform: dict[str, str] | None = None) -> dict[str, Any]:
    fields = {"architecture": "amd64", "os": "linux"} if platform is None else platform
    raw = json.dumps(fields | {"rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    return {"mediaType": DOCKER_CONFIG, "digest": _blob(registry, raw), "size": len(raw)}


def _put(registry: MemoryRegistry, tag: str, data: dict[str, Any], media: str = DOCKER_MANIFEST) -> str:
    raw = json.dumps(data).encode()
    registry.manifests[NAME, tag] = registry.manifests[NAME, digest_of(raw)] = (raw, media)
    return digest_of(raw)


def _image(
    registry: MemoryRegistry,
    tag: str,
    tars: list[bytes],
    *,
    annotations: dict[str, str] | None = None,
    platform: dict[str, str] | None = None,
) -> str:
    layers = [_gzip_layer(registry, tar) for tar in tars]
    data: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": _config(registry, [digest_of(tar) for tar in tars], platform),
        "layers": layers,
    }
    return _put(registry, tag, data | ({"annotations": annotations} if annotations else {}))


def _stored(registry: MemoryRegistry, ref: str) -> tuple[bytes, str]:
    return registry.manifests[NAME, ref]


def _zstd_descriptor(registry: MemoryRegistry, digest: str, tar: bytes) -> dict[str, Any]:
    """The descriptor a zstd layer must have, from the blob the registry holds, once it is seen to unpack to `tar`."""
    blob = registry.blobs[NAME, digest]
    assert zstandard.ZstdDecompressor().decompressobj().decompress(blob) == tar
    return {"mediaType": ZSTD_LAYER, "digest": digest_of(blob), "size": len(blob)}


def _layer_digests(raw: bytes) -> list[str]:
    return [str(layer["digest"]) for layer in json.loads(raw)["layers"]]


def _manifest_puts(net: Net) -> list[str]:
    return [s.path.rsplit("/manifests/", 1)[1] for s in net.sent if s.method == "PUT" and "/manifests/" in s.path]


class Signer:
    """A before_tag that records what it was shown and what the registry held then; it signs all it is shown."""

    def __init__(self, registry: MemoryRegistry, tag: str) -> None:
        self.registry, self.tag = registry, tag
        self.shown: list[list[str]] = []
        self.held: dict[str, tuple[bytes, str] | None] = {}
        self.tag_written_before = False

    def __call__(self, digests: list[str]) -> list[str]:
        self.shown.append(list(digests))
        self.held = {d: self.registry.manifests.get((NAME, d)) for d in digests}
        self.tag_written_before = (NAME, self.tag) in self.registry.manifests
        return [*digests, "signed-by-the-test"]


# --- the tag ------------------------------------------------------------------------------------------------------


def test_a_tag_of_123_characters_gets_its_128_character_zstd_tag() -> None:
    tag = "v" * 123
    assert zstd_tag(tag) == tag + "-zstd" and len(zstd_tag(tag)) == 128
    assert zstd_tag("1.0") == "1.0-zstd"


def test_a_tag_of_124_characters_is_refused_in_one_line() -> None:
    tag = "v" * 124
    with pytest.raises(UsageError) as raised:
        zstd_tag(tag)
    assert str(raised.value) == f"tag '{tag}' is too long for a zstd copy ({tag}-zstd would pass 128 characters)"


# --- the image copy, exactly --------------------------------------------------------------------------------------


def test_an_image_copy_is_canonical_oci_json_with_the_source_annotations_and_what_it_was_made_from() -> None:
    net, registry, client = _setup()
    tars = [tar_of("a.bin", 20_000), tar_of("b.bin", 3_000)]
    layers = [_gzip_layer(registry, tars[0]), _gzip_layer(registry, tars[1], OCI_GZIP)]
    config = _config(registry, [digest_of(t) for t in tars])
    notes = {"org.opencontainers.image.title": "torch", MADE_FROM: "sha256:" + "0" * 64}  # the old one is replaced
    source = _put(
        registry,
        "2.5",
        {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": layers, "annotations": notes},
    )
    result = zstd_copy(client, parse_ref(f"{REPO}:2.5"))
    raw, media = _stored(registry, "2.5-zstd")
    written = [_zstd_descriptor(registry, d, t) for d, t in zip(_layer_digests(raw), tars, strict=True)]
    expected = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config | {"mediaType": OCI_CONFIG},  # the same config bytes, named as an OCI manifest names them
        "layers": written,
        "annotations": {"org.opencontainers.image.title": "torch", MADE_FROM: source},
    }
    assert raw == _canonical(expected) and media == OCI_MANIFEST
    assert _manifest_puts(net) == ["2.5-zstd"]
    gzip_bytes, zstd_bytes = layers[0]["size"] + layers[1]["size"], written[0]["size"] + written[1]["size"]
    assert result.as_json() == {
        "source": f"{REPO}:2.5",
        "target": f"{REPO}:2.5-zstd",
        "digest": digest_of(raw),
        "unchanged": False,
        "recompressed": 2,
        "present": 0,
        "gzip_bytes": gzip_bytes,
        "zstd_bytes": zstd_bytes,
        "platforms": ["linux/amd64"],
        "signed": [],
    }
    assert result.summary() == (
        f"wrote {REPO}:2.5-zstd ({digest_of(raw)}): 2 layers recompressed, 0 already there; "
        f"{gzip_bytes} bytes gzip -> {zstd_bytes} bytes zstd"
    )


def test_only_the_key_spelled_mediaType_is_the_config_s_media_type() -> None:
    """JSON keys are case-sensitive: stray keys spelled otherwise are kept as they are and decide nothing."""
    _, registry, client = _setup()
    tar = tar_of("k", 800)
    stray = {"mediatype": OCI_CONFIG, "MEDIATYPE": OCI_CONFIG, "XXmediaTypeXX": OCI_CONFIG}
    config = _config(registry, [digest_of(tar)]) | stray
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": config,
        "layers": [_gzip_layer(registry, tar)],
    }
    _put(registry, "k", manifest)
    zstd_copy(client, parse_ref(f"{REPO}:k"))
    assert json.loads(_stored(registry, "k-zstd")[0])["config"] == config | {"mediaType": OCI_CONFIG}


def test_an_unchanged_copy_says_so_in_one_line_naming_its_source() -> None:
    _, registry, client = _setup()
    _image(registry, "a", [tar_of("a", 900)])
    first = zstd_copy(client, parse_ref(f"{REPO}:a"))
    again = zstd_copy(client, parse_ref(f"{REPO}:a"))
    assert (again.source, again.target, again.digest, again.unchanged) == (
        f"{REPO}:a",
        f"{REPO}:a-zstd",
        first.digest,
        True,
    )
    assert again.summary() == f"{REPO}:a-zstd already is the zstd copy of {REPO}:a: nothing to do"


@pytest.mark.parametrize(
    ("platform", "named"),
    [({"architecture": "arm64"}, "/arm64"), ({"os": "linux"}, "linux/")],
    ids=["no-os", "no-arch"],
)
def test_a_config_that_names_no_os_or_architecture_reports_an_empty_part(platform: dict[str, str], named: str) -> None:
    _, registry, client = _setup()
    _image(registry, "p", [tar_of("p", 700)], platform=platform)
    assert zstd_copy(client, parse_ref(f"{REPO}:p")).platforms == [named]


# --- the index copy, exactly --------------------------------------------------------------------------------------


def _index_with_an_attestation(registry: MemoryRegistry) -> tuple[str, list[dict[str, Any]], list[bytes]]:
    """An annotated index: first an entry whose manifest has no layers (an attestation: unknown/unknown), then
    amd64 and arm64 images. Returns its digest, its entries and the images' tars."""
    tars = [tar_of("amd", 5000), tar_of("arm", 6000)]
    amd = _image(registry, "x-amd64", [tars[0]])
    arm = _image(registry, "x-arm64", [tars[1]], platform={"architecture": "arm64", "os": "linux"})
    empty = {"mediaType": OCI_CONFIG, "digest": _blob(registry, b"{}"), "size": 2}
    attestation = _put(registry, "att", {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": empty}, OCI_MANIFEST)
    entries: list[dict[str, Any]] = [
        {
            "mediaType": OCI_MANIFEST,
            "digest": attestation,
            "size": len(_stored(registry, attestation)[0]),
            "platform": {"architecture": "unknown", "os": "unknown"},
            "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
        },
        {"mediaType": DOCKER_MANIFEST, "digest": amd, "size": len(_stored(registry, amd)[0]),
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": DOCKER_MANIFEST, "digest": arm, "size": len(_stored(registry, arm)[0]),
         "platform": {"architecture": "arm64", "os": "linux"}},
    ]  # fmt: skip
    data = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries, "annotations": {"org.example": "x"}}
    return _put(registry, "x", data, OCI_INDEX), entries, tars


def test_an_index_copy_keeps_a_layerless_entry_and_names_each_platform_copy_by_digest_and_size() -> None:
    net, registry, client = _setup()
    index, entries, tars = _index_with_an_attestation(registry)
    result = zstd_copy(client, parse_ref(f"{REPO}:x"))
    raw, media = _stored(registry, "x-zstd")
    children = [str(e["digest"]) for e in json.loads(raw)["manifests"][1:]]
    copies = [_stored(registry, child) for child in children]
    expected = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            entries[0],
            *(
                entry | {"mediaType": OCI_MANIFEST, "digest": digest_of(copy), "size": len(copy)}
                for entry, (copy, _) in zip(entries[1:], copies, strict=True)
            ),
        ],
        "annotations": {"org.example": "x", MADE_FROM: index},
    }
    assert raw == _canonical(expected) and media == OCI_INDEX
    for (copy, copy_media), entry, tar in zip(copies, entries[1:], tars, strict=True):
        assert copy_media == OCI_MANIFEST and json.loads(copy)["annotations"] == {MADE_FROM: entry["digest"]}
        assert copy == _canonical(json.loads(copy))
        _zstd_descriptor(registry, _layer_digests(copy)[0], tar)
    assert _manifest_puts(net) == [*children, "x-zstd"]  # each platform's copy by its digest, then the tag
    assert (result.recompressed, result.platforms, result.digest) == (2, ["linux/amd64", "linux/arm64"], digest_of(raw))


def test_a_signer_sees_the_index_and_its_platform_copies_already_there_by_digest_and_not_the_attestation() -> None:
    net, registry, client = _setup()
    _index_with_an_attestation(registry)
    signer = Signer(registry, "x-zstd")
    result = zstd_copy(client, parse_ref(f"{REPO}:x"), before_tag=signer)
    raw = _stored(registry, "x-zstd")[0]
    children = [str(e["digest"]) for e in json.loads(raw)["manifests"][1:]]
    assert signer.shown == [[digest_of(raw), *children]]
    assert result.signed == [digest_of(raw), *children, "signed-by-the-test"]
    assert signer.held[digest_of(raw)] == (raw, OCI_INDEX) and not signer.tag_written_before
    assert _manifest_puts(net) == [*children, digest_of(raw), "x-zstd"]


def test_a_signer_sees_an_image_copy_already_there_by_digest_with_its_media_type() -> None:
    net, registry, client = _setup()
    _image(registry, "a", [tar_of("a", 900)])
    signer = Signer(registry, "a-zstd")
    result = zstd_copy(client, parse_ref(f"{REPO}:a"), before_tag=signer)
    raw = _stored(registry, "a-zstd")[0]
    assert signer.shown == [[digest_of(raw)]] and result.signed == [digest_of(raw), "signed-by-the-test"]
    assert signer.held == {digest_of(raw): (raw, OCI_MANIFEST)} and not signer.tag_written_before
    assert _manifest_puts(net) == [digest_of(raw), "a-zstd"]
    assert result.summary().endswith("; 2 signature(s) written")


def test_an_existing_copy_that_declares_itself_an_image_is_signed_as_one_even_with_a_manifests_list() -> None:
    """The mediaType decides (an ambiguous document is not read as an index: the OCI 1.0.2 rule)."""
    net, registry, client = _setup()
    source = _image(registry, "a", [tar_of("a", 900)])
    stray = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "7" * 64, "size": 10, "platform": {"os": "linux"}}
    copy = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "manifests": [stray], "annotations": {MADE_FROM: source}}
    existing = _put(registry, "a-zstd", copy, OCI_MANIFEST)
    signer = Signer(registry, "a-zstd")
    result = zstd_copy(client, parse_ref(f"{REPO}:a"), before_tag=signer)
    assert signer.shown == [[existing]]
    assert (result.unchanged, result.digest, result.signed) == (True, existing, [existing, "signed-by-the-test"])
    assert _manifest_puts(net) == []


# --- reuse of an alias's copy -------------------------------------------------------------------------------------


def test_an_alias_reuses_the_copy_made_from_its_manifest_and_skips_a_missing_tag_and_another_image_s_copy() -> None:
    net, registry, client = _setup()
    source = _image(registry, "1.0", [tar_of("one", 4000)])
    registry.manifests[NAME, "latest"] = _stored(registry, source)
    _image(registry, "0.9", [tar_of("nine", 4000)])
    zstd_copy(client, parse_ref(f"{REPO}:1.0"))
    zstd_copy(client, parse_ref(f"{REPO}:0.9"))
    made = _stored(registry, "1.0-zstd")
    sent = len(net.sent)
    signer = Signer(registry, "latest-zstd")
    result = zstd_copy(
        client, parse_ref(f"{REPO}:latest"), reuse=("gone-zstd", "0.9-zstd", "1.0-zstd"), before_tag=signer
    )
    assert _stored(registry, "latest-zstd") == made
    assert signer.shown == [[digest_of(made[0])]] and not signer.tag_written_before
    assert result.as_json() == {
        "source": f"{REPO}:latest",
        "target": f"{REPO}:latest-zstd",
        "digest": digest_of(made[0]),
        "unchanged": False,
        "recompressed": 0,
        "present": 0,
        "gzip_bytes": 0,
        "zstd_bytes": 0,
        "platforms": [],
        "signed": [digest_of(made[0]), "signed-by-the-test"],
    }
    assert not [s for s in net.sent[sent:] if "/blobs/" in s.path]  # nothing read again, nothing recompressed
    assert [s.path.rsplit("/", 1)[1] for s in net.sent[sent:] if s.method == "GET"] == [
        "latest", "latest-zstd", "gone-zstd", "0.9-zstd", "1.0-zstd"
    ]  # fmt: skip


# --- layers -------------------------------------------------------------------------------------------------------


def test_a_zstd_layer_is_kept_as_it_is_and_not_read_or_counted() -> None:
    net, registry, client = _setup()
    tar = tar_of("g", 3000)
    kept = {"mediaType": ZSTD_LAYER, "digest": "sha256:" + "e" * 64, "size": 77, "annotations": {"k": "v"}}
    gz = _gzip_layer(registry, tar)
    config = _config(registry, ["sha256:" + "d" * 64, digest_of(tar)])
    _put(registry, "m", {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": [kept, gz]})
    result = zstd_copy(client, parse_ref(f"{REPO}:m"))
    layers = json.loads(_stored(registry, "m-zstd")[0])["layers"]
    assert layers[0] == kept and layers[1] == _zstd_descriptor(registry, layers[1]["digest"], tar)
    assert not [url for url in net.urls() if "e" * 64 in url]
    assert (result.recompressed, result.present, result.gzip_bytes, result.zstd_bytes) == (
        1, 0, gz["size"], layers[1]["size"]
    )  # fmt: skip


def test_a_layer_that_is_neither_gzip_nor_zstd_is_refused_in_one_line() -> None:
    _, registry, client = _setup()
    tar = tar_of("plain", 1000)
    plain = {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": _blob(registry, tar), "size": len(tar)}
    config = _config(registry, [digest_of(tar)])
    _put(registry, "u", {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": [plain]})
    with pytest.raises(PushError) as raised:
        zstd_copy(client, parse_ref(f"{REPO}:u"))
    assert str(raised.value) == (
        f"{REPO}: layer {plain['digest']} is application/vnd.oci.image.layer.v1.tar, not gzip: not recompressed"
    )
    assert registry.uploads == [] and (NAME, "u-zstd") not in registry.manifests


def test_a_layer_without_a_size_counts_no_gzip_bytes() -> None:
    _, registry, client = _setup()
    tars = [tar_of("s", 2000), tar_of("t", 2500)]
    sized, unsized = _gzip_layer(registry, tars[0]), _gzip_layer(registry, tars[1])
    del unsized["size"]
    config = _config(registry, [digest_of(t) for t in tars])
    _put(
        registry, "n", {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": [sized, unsized]}
    )
    result = zstd_copy(client, parse_ref(f"{REPO}:n"))
    assert result.gzip_bytes == sized["size"] and result.recompressed == 2


def test_a_gzip_layer_of_several_members_is_all_recompressed() -> None:
    """gzip allows members one after another (pigz, concatenated streams); the tar is all of them together."""
    _, registry, client = _setup()
    tar = tar_of("multi", 30_000)
    blob = (
        gzip.compress(tar[:10_000], mtime=0)
        + gzip.compress(tar[10_000:20_000], mtime=0)
        + gzip.compress(tar[20_000:], mtime=0)
    )
    layer = {"mediaType": GZIP_LAYER, "digest": _blob(registry, blob), "size": len(blob)}
    config = _config(registry, [digest_of(tar)])
    _put(registry, "mm", {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": [layer]})
    zstd_copy(client, parse_ref(f"{REPO}:mm"))
    raw = _stored(registry, "mm-zstd")[0]
    assert json.loads(raw)["layers"] == [_zstd_descriptor(registry, _layer_digests(raw)[0], tar)]


def test_a_layer_that_zstd_writes_in_several_pieces_has_the_size_of_all_of_them() -> None:
    """Incompressible bytes: the compressor hands out blocks before its flush, so the size is a sum."""
    _, registry, client = _setup()
    tar = random.Random(7).randbytes(300_000)
    _image(registry, "big", [tar])
    result = zstd_copy(client, parse_ref(f"{REPO}:big"))
    raw = _stored(registry, "big-zstd")[0]
    (layer,) = json.loads(raw)["layers"]
    assert layer == _zstd_descriptor(registry, layer["digest"], tar) and layer["size"] > 300_000
    assert result.zstd_bytes == layer["size"]


@pytest.mark.parametrize(("limit", "to_disk"), [(1000, True), (1_000_000, False)], ids=["above", "below"])
def test_a_recompressed_layer_goes_to_a_temporary_file_only_above_the_spool_size(
    monkeypatch: pytest.MonkeyPatch, limit: int, to_disk: bool
) -> None:
    files: list[IO[bytes]] = []
    real = tempfile.TemporaryFile

    def recorded(*args: Any, **kwargs: Any) -> IO[bytes]:
        files.append(real(*args, **kwargs))
        return files[-1]

    monkeypatch.setattr(zstd, "_SPOOL", limit)
    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    _, registry, client = _setup()
    tar = random.Random(3).randbytes(20_000)
    _image(registry, "s", [tar])
    zstd_copy(client, parse_ref(f"{REPO}:s"))
    raw = _stored(registry, "s-zstd")[0]
    _zstd_descriptor(registry, _layer_digests(raw)[0], tar)
    assert len(files) == (1 if to_disk else 0)


def test_the_zstd_blob_is_looked_for_with_the_push_scope_the_upload_needs_anyway() -> None:
    registry = MemoryRegistry(HOST)
    net = Net()
    ScopedRegistry(net, registry)  # the token names the scopes it was asked for
    client = Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=4096))
    _image(registry, "a", [tar_of("a", 900)])
    zstd_copy(client, parse_ref(f"{REPO}:a"))
    (zstd_layer,) = _layer_digests(_stored(registry, "a-zstd")[0])
    heads = [s for s in net.sent if s.method == "HEAD" and s.path.endswith(f"/blobs/{zstd_layer}") and s.bearer]
    assert heads and {s.bearer for s in heads} == {f"repository:{NAME}:pull,push"}


# --- refusals, each one line --------------------------------------------------------------------------------------


def test_an_index_entry_the_registry_does_not_have_is_named_and_no_tag_is_written() -> None:
    _, registry, client = _setup()
    amd = _image(registry, "x-amd64", [tar_of("amd", 500)])
    gone = "sha256:" + "9" * 64
    entries = [
        {"mediaType": DOCKER_MANIFEST, "digest": d, "size": 1, "platform": {"architecture": a, "os": "linux"}}
        for d, a in ((amd, "amd64"), (gone, "arm64"))
    ]
    _put(registry, "x", {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}, OCI_INDEX)
    with pytest.raises(PushError) as raised:
        zstd_copy(client, parse_ref(f"{REPO}:x"))
    assert str(raised.value) == f"{REPO}@{gone} is listed in the index but missing"
    assert (NAME, "x-zstd") not in registry.manifests


def test_a_config_with_fewer_diff_ids_than_layers_is_refused_in_one_line() -> None:
    _, registry, client = _setup()
    tars = [tar_of("a", 500), tar_of("b", 500)]
    layers = [_gzip_layer(registry, t) for t in tars]
    config = _config(registry, [digest_of(tars[0])])
    manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": config, "layers": layers}
    source = _put(registry, "d", manifest)
    with pytest.raises(PushError) as raised:
        zstd_copy(client, parse_ref(f"{REPO}:d"))
    assert str(raised.value) == f"{REPO}@{source}: 2 layers but 1 diff_ids in its config"
    assert registry.uploads == []


def _one_layer(registry: MemoryRegistry, tag: str, blob: bytes, diff_id: str) -> str:
    layer = {"mediaType": GZIP_LAYER, "digest": _blob(registry, blob), "size": len(blob)}
    _put(registry, tag, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": _config(registry, [diff_id]),
                         "layers": [layer]})  # fmt: skip
    return str(layer["digest"])


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"this is not gzip", "Error -3 while decompressing data: incorrect header check"),
        (gzip.compress(tar_of("cut", 3000), mtime=0)[:-8], "the gzip stream ends early"),  # no CRC and size trailer
    ],
    ids=["not-gzip", "truncated"],
)
def test_a_layer_that_is_not_whole_gzip_is_refused_in_one_line_and_nothing_is_uploaded(blob: bytes, why: str) -> None:
    _, registry, client = _setup()
    layer = _one_layer(registry, "g", blob, digest_of(tar_of("cut", 3000)))
    with pytest.raises(PushError) as raised:
        zstd_copy(client, parse_ref(f"{REPO}:g"))
    assert str(raised.value) == f"{REPO}: layer {layer} is not valid gzip ({why})"
    assert registry.uploads == [] and (NAME, "g-zstd") not in registry.manifests


def test_a_connection_lost_while_reading_a_layer_is_one_line_naming_the_registry_and_the_layer() -> None:
    registry = MemoryRegistry(HOST)
    tar = tar_of("lost", 5000)
    blob = gzip.compress(tar, mtime=0)
    layer = _one_layer(registry, "l", blob, digest_of(tar))

    def cut(sent: Sent) -> Answer | Exception | None:
        if sent.method == "GET" and sent.path.endswith(f"/blobs/{layer}"):
            return Answer(200, blob, {"Docker-Content-Digest": layer}, cut_after=100)
        return registry.handle(sent)

    net = Net().on(cut)
    client = Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=4096))
    with pytest.raises(PushError) as raised:
        zstd_copy(client, parse_ref(f"{REPO}:l"))
    reason = f"{HOST} is unreachable: ChunkedEncodingError"  # builder/net/http.py's line for a body cut short
    assert str(raised.value) == f"registry {HOST}: reading layer {layer}: {reason}"
    assert registry.uploads == [] and (NAME, "l-zstd") not in registry.manifests


def test_an_attestation_with_in_toto_layers_is_kept_as_it_is_and_the_platform_images_copied() -> None:
    """BuildKit's attestation manifests carry layers (in-toto statements, not gzip): the copy once stopped at
    them with a PushError (here "1 layers but 0 diff_ids in its config"; with diff_ids, "... is
    application/vnd.in-toto+json, not gzip"), so `promote --zstd` of a buildx-pushed image failed."""
    _, registry, client = _setup()
    statement = _blob(registry, b'{"_type":"https://in-toto.io/Statement/v0.1"}')
    empty = {"mediaType": OCI_CONFIG, "digest": _blob(registry, b"{}"), "size": 2}
    layer = {"mediaType": "application/vnd.in-toto+json", "digest": statement, "size": 46}
    attestation = _put(registry, "att", {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": empty,
                                         "layers": [layer]}, OCI_MANIFEST)  # fmt: skip
    amd = _image(registry, "x-amd64", [tar_of("amd", 5000)])
    kept = {
        "mediaType": OCI_MANIFEST,
        "digest": attestation,
        "size": len(_stored(registry, attestation)[0]),
        "platform": {"architecture": "unknown", "os": "unknown"},
        "annotations": {"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": amd},
    }
    image = {"mediaType": DOCKER_MANIFEST, "digest": amd, "size": len(_stored(registry, amd)[0]),
             "platform": {"architecture": "amd64", "os": "linux"}}  # fmt: skip
    _put(registry, "x", {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [image, kept]}, OCI_INDEX)
    result = zstd_copy(client, parse_ref(f"{REPO}:x"))
    copied = json.loads(_stored(registry, "x-zstd")[0])["manifests"]
    assert copied[1] == kept
    assert copied[0]["digest"] != amd and copied[0]["mediaType"] == OCI_MANIFEST
    assert (result.recompressed, result.platforms) == (1, ["linux/amd64"])
