"""The zstd copy of an image (builder/oci/zstd.py) against the in-memory registry: zstd layers that unpack to
the same diff_ids, the config untouched, an OCI manifest under <tag>-zstd that says what it was made from,
nothing written again for an unchanged image, shared layers pushed once, and a layer that is not what its
digest or diff_id says refused before anything is written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard
from cryptography.hazmat.primitives.asymmetric import ec
from http_kit import Answer, Net, Sent
from registry_kit import MemoryRegistry, tar_of
from trust_kit import write_key

from builder.core.errors import PushError, UsageError
from builder.oci.client import OCI_INDEX, OCI_MANIFEST, Distribution, digest_of
from builder.oci.refs import parse_ref, parse_repo
from builder.oci.upload import UploadPolicy
from builder.oci.zstd import MADE_FROM, ZSTD_LAYER, zstd_copy
from builder.trust import cosign
from builder.trust.keys import SigningKey, public_key, signing_key

HOST = "127.0.0.1:5999"
NAME = "team/torch"


def _image(registry: MemoryRegistry, tag: str, tars: list[bytes], *, arch: str = "amd64") -> str:
    return registry.add_gzip_image(NAME, tag, tars, arch=arch)


def _setup() -> tuple[Net, MemoryRegistry, Distribution]:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    client = Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=4096))
    return net, registry, client


def _copy_of(registry: MemoryRegistry, tag: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(registry.manifests[NAME, tag][0])
    return data


def test_the_copy_has_zstd_layers_that_unpack_to_the_same_diff_ids_and_the_same_config() -> None:
    _, registry, client = _setup()
    tars = [tar_of("a.bin", 20_000), tar_of("b.bin", 3_000)]
    source = _image(registry, "2.14.1-runtime", tars)
    result = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:2.14.1-runtime"))
    copy = _copy_of(registry, "2.14.1-runtime-zstd")
    original = _copy_of(registry, "2.14.1-runtime")
    assert copy["mediaType"] == OCI_MANIFEST and registry.manifests[NAME, "2.14.1-runtime-zstd"][1] == OCI_MANIFEST
    assert copy["annotations"] == {MADE_FROM: source}
    config = copy["config"]
    assert isinstance(config, dict) and isinstance(original["config"], dict)
    assert config["digest"] == original["config"]["digest"]  # the very same config blob
    assert config["mediaType"] == "application/vnd.oci.image.config.v1+json"
    layers = copy["layers"]
    assert isinstance(layers, list) and [layer["mediaType"] for layer in layers] == [ZSTD_LAYER, ZSTD_LAYER]
    for layer, tar in zip(layers, tars, strict=True):
        blob = registry.blobs[NAME, layer["digest"]]
        assert len(blob) == layer["size"] and digest_of(blob) == layer["digest"]
        assert zstandard.ZstdDecompressor().decompressobj().decompress(blob) == tar
    assert (result.recompressed, result.present, result.digest) == (
        2,
        0,
        digest_of(registry.manifests[NAME, "2.14.1-runtime-zstd"][0]),
    )
    assert result.zstd_bytes == sum(layer["size"] for layer in layers)
    assert registry.manifests[NAME, "2.14.1-runtime"][0] == registry.manifests[NAME, source][0]  # gzip tag untouched


def test_an_unchanged_image_is_read_not_written_and_a_shared_layer_is_pushed_once() -> None:
    net, registry, client = _setup()
    shared = tar_of("torch.so", 30_000)
    _image(registry, "a", [shared, tar_of("a", 100)])
    zstd_copy(client, parse_ref(f"{HOST}/{NAME}:a"))
    puts = len(net.urls("PUT"))
    again = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:a"))
    assert again.unchanged and len(net.urls("PUT")) == puts
    _image(registry, "b", [shared, tar_of("b", 100)])
    other = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:b"))
    assert (other.recompressed, other.present) == (1, 1)  # the same zstd bytes: already in the repository


def test_an_index_becomes_an_index_of_zstd_copies_platform_by_platform() -> None:
    _, registry, client = _setup()
    amd = _image(registry, "x-amd64", [tar_of("amd", 5000)])
    arm = _image(registry, "x-arm64", [tar_of("arm", 5000)], arch="arm64")
    index = registry.add_index(NAME, "x", {"linux/amd64": amd, "linux/arm64": arm})
    result = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:x"))
    copy = _copy_of(registry, "x-zstd")
    assert copy["mediaType"] == OCI_INDEX and copy["annotations"] == {MADE_FROM: index}
    entries = copy["manifests"]
    assert isinstance(entries, list)
    assert [e["platform"]["architecture"] for e in entries] == ["amd64", "arm64"]
    for entry, source in zip(entries, (amd, arm), strict=True):
        child = _copy_of(registry, entry["digest"])
        assert child["annotations"] == {MADE_FROM: source} and entry["mediaType"] == OCI_MANIFEST
    assert sorted(result.platforms) == ["linux/amd64", "linux/arm64"]


def test_a_layer_whose_tar_is_not_its_diff_id_stops_the_copy_before_anything_is_written() -> None:
    _, registry, client = _setup()
    _image(registry, "bad", [tar_of("a", 5000)])
    raw, media = registry.manifests[NAME, "bad"]
    manifest = json.loads(raw)
    config = json.loads(registry.blobs[NAME, manifest["config"]["digest"]])
    config["rootfs"]["diff_ids"] = ["sha256:" + "0" * 64]
    blob = json.dumps(config).encode()
    registry.blobs[NAME, digest_of(blob)] = blob
    manifest["config"]["digest"] = digest_of(blob)
    registry.manifests[NAME, "bad"] = (json.dumps(manifest).encode(), media)
    with pytest.raises(PushError, match=r"unpacks to sha256:[0-9a-f]{64}, not its diff_id sha256:0{64}$"):
        zstd_copy(client, parse_ref(f"{HOST}/{NAME}:bad"))
    assert registry.uploads == [] and (NAME, "bad-zstd") not in registry.manifests


def test_a_layer_that_is_not_its_digest_is_refused() -> None:
    _, registry, client = _setup()
    _image(registry, "t", [tar_of("a", 5000)])
    layer = json.loads(registry.manifests[NAME, "t"][0])["layers"][0]["digest"]
    registry.blobs[NAME, layer] = gzip.compress(tar_of("other", 5000), mtime=0)
    with pytest.raises(PushError, match=f"answered layer {layer} with other content$"):
        zstd_copy(client, parse_ref(f"{HOST}/{NAME}:t"))


def test_a_digest_reference_or_a_missing_image_is_one_line() -> None:
    _, _, client = _setup()
    with pytest.raises(UsageError, match="name a tag"):
        zstd_copy(client, parse_ref(f"{HOST}/{NAME}@sha256:" + "a" * 64))
    with pytest.raises(PushError, match=r":nothing does not exist: nothing to copy$"):
        zstd_copy(client, parse_ref(f"{HOST}/{NAME}:nothing"))


# --- signed copies (promote / publish with a key: builder/trust/cosign.py's signer) ---------------------------


def _signing(tmp_path: Path) -> tuple[SigningKey, ec.EllipticCurvePublicKey]:
    key = signing_key(write_key(tmp_path), {})
    assert key is not None
    return key, public_key(tmp_path / "key.pem.pub")


class TagWatch(MemoryRegistry):
    """Records, when the copy's tag is written, which digests had a signature by then."""

    signed_at_tag: set[str] | None = None

    def _manifest(self, name: str, ref: str, sent: Sent) -> Answer:
        if sent.method == "PUT" and ref.endswith("-zstd"):
            self.signed_at_tag = {t.removesuffix(".sig").replace("-", ":", 1) for (_, t) in self.manifests if
                                  t.endswith(".sig")}  # fmt: skip
        return super()._manifest(name, ref, sent)


def test_with_a_signer_an_index_copy_and_each_platform_copy_are_signed_before_the_tag(tmp_path: Path) -> None:
    net = Net()
    registry = TagWatch(HOST)
    registry.attach(net)
    client = Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=4096))
    amd = _image(registry, "x-amd64", [tar_of("amd", 5000)])
    arm = _image(registry, "x-arm64", [tar_of("arm", 5000)], arch="arm64")
    registry.add_index(NAME, "x", {"linux/amd64": amd, "linux/arm64": arm})
    key, public = _signing(tmp_path)
    repo = parse_repo(f"{HOST}/{NAME}")
    result = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:x"), before_tag=cosign.signer(client, repo, key))
    children = [str(e["digest"]) for e in json.loads(registry.manifests[NAME, "x-zstd"][0])["manifests"]]
    assert result.signed == [result.digest, *children]
    assert registry.signed_at_tag == set(result.signed)  # every signature was there before the tag
    assert [cosign.signed_by(client, repo, d, public) for d in result.signed] == [None, None, None]
    assert result.summary().endswith("; 3 signature(s) written")
    again = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:x"), before_tag=cosign.signer(client, repo, key))
    assert again.unchanged and again.signed == []  # signed already: nothing written


def test_a_copy_made_without_a_key_is_signed_by_the_rerun_with_one(tmp_path: Path) -> None:
    _, registry, client = _setup()
    _image(registry, "a", [tar_of("a", 900)])
    first = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:a"))
    assert first.signed == [] and "signature" not in first.summary()
    key, public = _signing(tmp_path)
    repo = parse_repo(f"{HOST}/{NAME}")
    again = zstd_copy(client, parse_ref(f"{HOST}/{NAME}:a"), before_tag=cosign.signer(client, repo, key))
    assert again.unchanged and again.signed == [first.digest]
    assert cosign.signed_by(client, repo, first.digest, public) is None
