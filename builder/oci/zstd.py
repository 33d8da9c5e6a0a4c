"""A zstd copy of an image, written registry-side beside its gzip original: `<tag>-zstd`.

Each gzip layer is read from the registry, decompressed, checked against its diff_id (the digest of the
uncompressed tar, which the recompressed layer keeps: the image config is not changed at all) and
compressed again with zstd; the new blob goes up chunked and resumable (builder/oci/upload.py). The copy is
an OCI manifest (zstd layers need one) with the same config blob, annotated with the digest of the manifest
it was made from, so a rerun on an unchanged image reads one manifest and writes nothing. An index becomes
an index of zstd copies, platform by platform.

zstd (level LEVEL, one thread per layer: the output depends on the input and the level only, so a layer
shared by two images gets one zstd blob, pushed once) is what Docker 23+, containerd, podman and the
Kubernetes runtimes pull; Debian 12's Docker 20.10 cannot, which is why gzip stays the default tag.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import zstandard

from builder.core.errors import PushError, UpstreamError, UsageError
from builder.oci.client import OCI_INDEX, OCI_MANIFEST, Distribution, Manifest, digest_of
from builder.oci.refs import ImageRef, RepoRef

SUFFIX = "-zstd"
LEVEL = 9  # docs/benchmarks.md: bytes and seconds against gzip at this level
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
GZIP_LAYERS = frozenset(
    {"application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.oci.image.layer.v1.tar+gzip"}
)
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MADE_FROM = "io.torchyard.zstd-of"  # annotation: the digest of the gzip manifest this copy was made from
_GZIP = 16 + zlib.MAX_WBITS  # zlib reads a gzip header and trailer with this
_SPOOL = 64 * 1024 * 1024  # a recompressed layer stays in memory up to this size, in a temporary file above
# Called with the copy's manifest digests (an index's first, then its platform images') once they are in the
# repository and before the tag names them; returns the digests it signed there (builder/trust/cosign.py's
# signer: promote and publish with a key).
BeforeTag = Callable[[list[str]], list[str]]


@dataclass
class ZstdCopy:
    source: str
    target: str
    digest: str = ""
    unchanged: bool = False  # the target tag already held the copy of this very source manifest
    recompressed: int = 0
    present: int = 0  # zstd blobs the repository already had (layers shared with an image copied before)
    gzip_bytes: int = 0
    zstd_bytes: int = 0
    platforms: list[str] = field(default_factory=list)
    signed: list[str] = field(default_factory=list)  # the manifests `before_tag` signed in this run
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # layers are copied in parallel

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def summary(self) -> str:
        signed = f"; {len(self.signed)} signature(s) written" if self.signed else ""
        if self.unchanged:
            return f"{self.target} already is the zstd copy of {self.source}: nothing to do{signed}"
        return (
            f"wrote {self.target} ({self.digest}): {self.recompressed} layers recompressed, {self.present} already "
            f"there; {self.gzip_bytes} bytes gzip -> {self.zstd_bytes} bytes zstd{signed}"
        )


def zstd_tag(tag: str) -> str:
    if len(tag) + len(SUFFIX) > 128:  # a tag is at most 128 characters
        raise UsageError(f"tag {tag!r} is too long for a zstd copy ({tag}{SUFFIX} would pass 128 characters)")
    return tag + SUFFIX


def zstd_copy(
    client: Distribution,
    source: ImageRef,
    level: int = LEVEL,
    reuse: Sequence[str] = (),
    before_tag: BeforeTag | None = None,
) -> ZstdCopy:
    """Write the zstd copy of `source` (a tag) under `<tag>-zstd` in the same repository. `reuse`: tags of
    zstd copies already written (an alias's immutable tag's): one made from the same manifest is written
    again under the new tag, without recompressing anything. `before_tag` sees the copy's manifests before
    the tag is written, also when the copy was there already (a rerun finishes a refused signature upload)."""
    if source.tag is None:
        raise UsageError(f"{source}: name a tag (repo:tag); its zstd copy goes under <tag>{SUFFIX}")
    target = ImageRef(source.repo, zstd_tag(source.tag), None)
    result = ZstdCopy(str(source), str(target))
    manifest = client.manifest(source.repo, source.reference)
    if manifest is None:
        raise PushError(f"{source} does not exist: nothing to copy")
    existing = client.manifest(target.repo, target.reference)
    if existing is not None and _made_from(existing) == manifest.digest:
        if before_tag is not None:
            result.signed = before_tag(_manifests(existing.raw))
        result.unchanged, result.digest = True, existing.digest
        return result
    for tag in reuse:
        found = client.manifest(source.repo, tag)
        if found is not None and _made_from(found) == manifest.digest:
            if before_tag is not None:
                result.signed = before_tag(_manifests(found.raw))
            result.digest = client.put_manifest(target.repo, target.reference, found.raw, found.media_type)
            return result
    if manifest.is_index:
        raw, media_type = _index_copy(client, source.repo, manifest, level, result), OCI_INDEX
    else:
        raw, media_type = _image_copy(client, source.repo, manifest, level, result), OCI_MANIFEST
    if before_tag is not None:  # in the repository by digest first: what signs it finds it there
        client.put_manifest(target.repo, digest_of(raw), raw, media_type)
        result.signed = before_tag(_manifests(raw))
    result.digest = client.put_manifest(target.repo, target.reference, raw, media_type)
    return result


def _manifests(raw: bytes) -> list[str]:
    """The digests a copy's tag stands for: an image's own; an index's, then each platform image's (entries such
    as BuildKit's attestations, platform unknown/unknown, are not images of a platform)."""
    data = json.loads(raw)
    entries = data.get("manifests") if data.get("mediaType") == OCI_INDEX else None
    if entries is None:
        return [digest_of(raw)]
    images = [e for e in entries if (e.get("platform") or {}).get("os") not in (None, "unknown")]
    return [digest_of(raw), *(str(e["digest"]) for e in images)]


def _made_from(manifest: Manifest) -> str | None:
    found = (manifest.data.get("annotations") or {}).get(MADE_FROM)
    return str(found) if found else None


def _index_copy(client: Distribution, repo: RepoRef, index: Manifest, level: int, result: ZstdCopy) -> bytes:
    entries = []
    for entry in index.data.get("manifests") or []:
        child = client.manifest(repo, str(entry["digest"]))
        if child is None:
            raise PushError(f"{repo}@{entry['digest']} is listed in the index but missing")
        if child.is_index or not child.data.get("layers") or _attestation(entry):  # kept as they are
            entries.append(dict(entry))
            continue
        raw = _image_copy(client, repo, child, level, result)
        digest = client.put_manifest(repo, digest_of(raw), raw, OCI_MANIFEST)
        entries.append(dict(entry) | {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(raw)})
    annotations = dict(index.data.get("annotations") or {}) | {MADE_FROM: index.digest}
    copy = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries, "annotations": annotations}
    return json.dumps(copy, sort_keys=True, separators=(",", ":")).encode()


def _attestation(entry: dict[str, Any]) -> bool:
    """BuildKit's attestation manifests (`docker buildx` pushes them by default): their in-toto layers are
    statements about an image, not a platform's filesystem, and are not gzip; the copy keeps them as they are."""
    return (entry.get("annotations") or {}).get("vnd.docker.reference.type") == "attestation-manifest"


def _image_copy(client: Distribution, repo: RepoRef, manifest: Manifest, level: int, result: ZstdCopy) -> bytes:
    config_descriptor = dict(manifest.data["config"])
    config = client.blob_json(repo, str(config_descriptor["digest"]))
    diff_ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
    layers = list(manifest.data.get("layers") or [])
    if len(diff_ids) != len(layers):
        raise PushError(f"{repo}@{manifest.digest}: {len(layers)} layers but {len(diff_ids)} diff_ids in its config")
    jobs = list(zip(layers, diff_ids, strict=True))
    copied = client.http.map(lambda job: _layer_copy(client, repo, job[0], str(job[1]), level, result), jobs)
    result.platforms.append(f"{config.get('os', '')}/{config.get('architecture', '')}")
    if config_descriptor.get("mediaType") != OCI_CONFIG:
        config_descriptor["mediaType"] = OCI_CONFIG  # the same bytes; an OCI manifest names them so
    annotations = dict(manifest.data.get("annotations") or {}) | {MADE_FROM: manifest.digest}
    copy = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config_descriptor,
        "layers": copied,
        "annotations": annotations,
    }
    return json.dumps(copy, sort_keys=True, separators=(",", ":")).encode()


def _layer_copy(
    client: Distribution, repo: RepoRef, layer: dict[str, Any], diff_id: str, level: int, result: ZstdCopy
) -> dict[str, Any]:
    media_type = str(layer.get("mediaType"))
    if media_type == ZSTD_LAYER:
        return dict(layer)
    if media_type not in GZIP_LAYERS:
        raise PushError(f"{repo}: layer {layer.get('digest')} is {media_type}, not gzip: not recompressed")
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:
        digest, size = _recompress(client, repo, str(layer["digest"]), diff_id, level, spool)
        if client.blob_exists(repo, digest, push=True):
            result.add(present=1)
        else:
            client.upload_file(repo, spool, digest, size)
            result.add(recompressed=1)
    result.add(gzip_bytes=int(layer.get("size") or 0), zstd_bytes=size)
    return {"mediaType": ZSTD_LAYER, "digest": digest, "size": size}


def _recompress(
    client: Distribution, repo: RepoRef, digest: str, diff_id: str, level: int, out: IO[bytes]
) -> tuple[str, int]:
    """gzip blob `digest` of `repo`, as zstd into `out`; (zstd digest, size). The gzip bytes must have their
    digest and the tar inside must have `diff_id`, or the copy stops here (nothing is uploaded)."""
    job = _Recompression(level, out)
    try:
        with client.stream_blob(repo, digest) as chunks:
            for chunk in chunks:
                job.feed(chunk)
        job.close()
    except zlib.error as exc:
        raise PushError(f"{repo}: layer {digest} is not valid gzip ({exc})") from None
    except UpstreamError as exc:
        raise PushError(f"registry {repo.host}: reading layer {digest}: {exc}") from None
    if "sha256:" + job.gzip.hexdigest() != digest:
        raise PushError(f"registry {repo.host} answered layer {digest} with other content")
    if "sha256:" + job.tar.hexdigest() != diff_id:
        raise PushError(f"{repo}: layer {digest} unpacks to sha256:{job.tar.hexdigest()}, not its diff_id {diff_id}")
    return "sha256:" + job.zstd.hexdigest(), job.size


class _Recompression:
    """gzip in, zstd out, with the sha256 of the gzip bytes, of the tar inside, and of the zstd bytes."""

    def __init__(self, level: int, out: IO[bytes]) -> None:
        self.out = out
        self.gzip, self.tar, self.zstd = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
        self.size = 0
        self.inflate = zlib.decompressobj(_GZIP)
        self.deflate = zstandard.ZstdCompressor(level=level).compressobj()

    def feed(self, data: bytes) -> None:
        self.gzip.update(data)
        while data:
            tar = self.inflate.decompress(data)
            self.tar.update(tar)
            self._write(self.deflate.compress(tar))
            data = self.inflate.unused_data  # the start of a next gzip member (a stream may have several)
            if data:
                self.inflate = zlib.decompressobj(_GZIP)

    def close(self) -> None:
        if not self.inflate.eof:
            raise zlib.error("the gzip stream ends early")
        self._write(self.deflate.flush())

    def _write(self, data: bytes) -> None:
        self.zstd.update(data)
        self.size += len(data)
        self.out.write(data)
