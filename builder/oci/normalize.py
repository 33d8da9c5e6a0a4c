"""An image's bytes made a function of its content: the post-build step Docker 20.10's BuildKit cannot do itself
(it knows no SOURCE_DATE_EPOCH), run on the image the engine saved (`docker save`), before it is pushed.

- every layer the build made (the base image's are kept as they are): each entry's mtime clamped to the epoch
  (later times become the epoch; earlier ones, as the venv's mtime 0, stay), PAX atime/ctime records dropped;
  a layer no entry of which changes is kept byte for byte (the venv's content-only layers keep their diff
  ids, so they stay shared between images);
- every layer gzip-compressed alike (level 6, no name, no time in the header);
- the config: `created` and each history entry's `created` are the epoch, the diff ids the new layers';
- an OCI image manifest over them, its JSON with sorted keys.

Two builds of the same content at different times so give the same manifest digest, unless a layer's content
itself differs; `layer_files` then says which files of that layer do (docs/reproducible.md).
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from builder.oci.client import Distribution
from builder.oci.refs import RepoRef

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
_VOLATILE_PAX = ("atime", "ctime")


@dataclass(frozen=True)
class Blob:
    path: Path
    digest: str
    size: int


@dataclass(frozen=True)
class Layer:
    blob: Blob  # the compressed layer
    diff_id: str  # sha256 of the uncompressed tar
    changed: bool  # False: the engine's tar kept byte for byte
    created_by: str  # the history entry that made it


@dataclass(frozen=True)
class NormalImage:
    manifest: bytes
    config: bytes
    layers: tuple[Layer, ...]

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()


def normalize_saved(saved: Path, out: Path, epoch: int) -> NormalImage:
    """The image of a `docker save` archive (one image), normalized, its blobs written under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(saved) as archive:
        index = json.load(_member(archive, "manifest.json"))[0]
        config = json.load(_member(archive, index["Config"]))
        made = [h for h in config.get("history", []) if not h.get("empty_layer")]
        base = base_layers(made)
        layers = []
        for number, name in enumerate(index["Layers"]):
            created_by = made[number].get("created_by", "") if number < len(made) else ""
            keep = number < base  # the base image's layers: as the lock's digest gave them
            layers.append(_layer(_member(archive, name), out / f"layer-{number:03d}", epoch, created_by, keep))
    config_bytes = normal_config(config, epoch, [layer.diff_id for layer in layers])
    config_blob = _write(out / "config.json", config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config_blob.digest, "size": config_blob.size},
        "layers": [{"mediaType": LAYER_TYPE, "digest": x.blob.digest, "size": x.blob.size} for x in layers],
    }
    return NormalImage(_json(manifest), config_bytes, tuple(layers))


def normal_config(config: dict[str, Any], epoch: int, diff_ids: list[str]) -> bytes:
    stamp = iso(epoch)
    done = dict(config)
    done["created"] = stamp
    done["history"] = [dict(h, created=stamp) for h in config.get("history", [])]
    done["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    return _json(done)


def iso(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    handle = archive.extractfile(name)
    if handle is None:
        raise ValueError(f"docker save archive: no file {name}")
    return handle


def base_layers(made: list[dict[str, Any]]) -> int:
    """How many leading layers the base image brought: those before the first layer a Dockerfile step of this
    build made (BuildKit's history comment). A base image built by BuildKit itself has such comments too: its
    layers are then normalized with the rest (still the same in every build, no longer the base's own)."""
    ours = [i for i, entry in enumerate(made) if entry.get("comment") == "buildkit.dockerfile.v0"]
    return ours[0] if ours else 0


GZIP_MAGIC, ZSTD_MAGIC = b"\x1f\x8b", b"\x28\xb5\x2f\xfd"


def _layer(source: IO[bytes], base: Path, epoch: int, created_by: str, keep: bool = False) -> Layer:
    raw = base.with_suffix(".tar")
    with raw.open("wb") as copy:
        _copy_uncompressed(source, copy)
    changed = not keep and _needs_change(raw, epoch)
    tar = base.with_suffix(".normal.tar") if changed else raw
    if changed:
        _rewrite(raw, tar, epoch)
    diff_id = "sha256:" + _sha256(tar)
    blob = _gzip(tar, base.with_suffix(".tar.gz"))
    return Layer(blob, diff_id, changed, created_by)


def _copy_uncompressed(source: IO[bytes], target: IO[bytes]) -> None:
    """A layer as a plain tar: the graph driver's `docker save` holds uncompressed layers, containerd's image store
    the registry's blobs (gzip, or zstd)."""
    head = source.read(4)
    source.seek(0)
    if head.startswith(GZIP_MAGIC):
        with gzip.GzipFile(fileobj=source, mode="rb") as unpacked:
            shutil.copyfileobj(unpacked, target, 1 << 20)
    elif head == ZSTD_MAGIC:
        import zstandard

        zstandard.ZstdDecompressor().copy_stream(source, target, read_size=1 << 20, write_size=1 << 20)
    else:
        shutil.copyfileobj(source, target, 1 << 20)


def _needs_change(path: Path, epoch: int) -> bool:
    with tarfile.open(path, "r|") as tar:
        return any(m.mtime > epoch or any(k in m.pax_headers for k in _VOLATILE_PAX) for m in tar)


def _rewrite(source: Path, target: Path, epoch: int) -> None:
    with tarfile.open(source, "r|") as tin, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tout:
        for member in tin:
            member.mtime = min(int(member.mtime), epoch)
            member.pax_headers = {k: v for k, v in member.pax_headers.items() if k not in (*_VOLATILE_PAX, "mtime")}
            tout.addfile(member, tin.extractfile(member) if member.isreg() else None)


def _gzip(source: Path, target: Path) -> Blob:
    with (
        source.open("rb") as raw,
        target.open("wb") as out,
        gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=out, mtime=0) as packed,
    ):
        shutil.copyfileobj(raw, packed, 1 << 20)
    return Blob(target, "sha256:" + _sha256(target), target.stat().st_size)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write(path: Path, data: bytes) -> Blob:
    path.write_bytes(data)
    return Blob(path, "sha256:" + hashlib.sha256(data).hexdigest(), len(data))


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def differing_layers(a: NormalImage, b: NormalImage) -> list[str]:
    """One line per layer whose diff id differs between two normalizations of the same build (their layer tars
    still on disk): its number, the step that made it, the files that differ in it (the first 12)."""
    found = []
    for number, (x, y) in enumerate(zip(a.layers, b.layers, strict=True)):
        if x.diff_id == y.diff_id:
            continue
        if not (layer_tar(x).exists() and layer_tar(y).exists()):
            found.append(f"layer {number} ({x.created_by[:90]}): its tars were not kept, files not compared")
            continue
        files_x, files_y = layer_files(layer_tar(x)), layer_files(layer_tar(y))
        differ = sorted(p for p in files_x.keys() | files_y.keys() if files_x.get(p) != files_y.get(p))
        found.append(f"layer {number} ({x.created_by[:90]}): {', '.join(differ[:12]) or 'entry order or headers'}")
    return found


def layer_tar(layer: Layer) -> Path:
    """The uncompressed tar `_layer` left beside the layer's blob: the rewritten one where it changed."""
    name = layer.blob.path.name.replace(".tar.gz", ".normal.tar" if layer.changed else ".tar")
    return layer.blob.path.with_name(name)


def layer_files(path: Path) -> dict[str, str]:
    """Path -> sha256 of the content (or the link target, or the kind) of every entry of a layer tar: what to
    compare when two builds' layers differ."""
    found = {}
    with tarfile.open(path, "r|") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isreg() else None
            what = hashlib.sha256(handle.read()).hexdigest() if handle else f"{member.type!r}->{member.linkname}"
            found[member.name] = f"{what} {member.mode:o} {member.uid}:{member.gid}"
    return found


def push_normal(client: Distribution, repo: RepoRef, tag: str, image: NormalImage) -> str:
    """The normalized image under repo:tag: each blob the registry lacks uploaded (a layer streamed from its
    file, the config from its bytes: an image without layers has one too), then the manifest; the digest the
    registry stored it under (that of the manifest's bytes)."""
    return push_normal_counted(client, repo, tag, image)[0]


def push_normal_counted(client: Distribution, repo: RepoRef, tag: str, image: NormalImage) -> tuple[str, int]:
    """push_normal, and the bytes it sent: the blobs the registry lacked (a blob sent again after a drop counts
    again, builder/oci/upload.py) and the manifest."""
    sent = 0
    for blob in [layer.blob for layer in image.layers]:
        if not client.blob_exists(repo, blob.digest, push=True):
            with blob.path.open("rb") as data:  # chunked and resumable past one chunk (oci/upload.py)
                sent += client.upload_file(repo, data, blob.digest, blob.path.stat().st_size).bytes
    config = "sha256:" + hashlib.sha256(image.config).hexdigest()
    if not client.blob_exists(repo, config, push=True):
        sent += client.upload_file(repo, io.BytesIO(image.config), config, len(image.config)).bytes
    return client.put_manifest(repo, tag, image.manifest, MANIFEST_TYPE), sent + len(image.manifest)
