"""The post-build normalization (builder/oci/normalize.py) on `docker save` archives made here: two saves of the
same content written at different times give the same manifest digest; a content-only layer is kept byte for
byte; a layer whose content differs is found, with its files."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from fake_engine import FakeEngine, contents_of, wall_off_the_engine
from http_kit import Net
from registry_kit import MemoryRegistry, save_archive
from render_kit import plan

from builder.core.kinds import Flavor
from builder.oci.client import Distribution
from builder.oci.normalize import (
    LAYER_TYPE,
    MANIFEST_TYPE,
    differing_layers,
    iso,
    layer_files,
    layer_tar,
    normalize_saved,
)
from builder.pipeline.pipeline import BuildSettings, build
from builder.pipeline.registry import Registry

EPOCH = 1_767_225_600  # 2026-01-01


def _layer(files: dict[str, bytes], mtime: float, atime: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            if atime:
                info.pax_headers = {"atime": str(mtime), "ctime": str(mtime)}
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _saved(path: Path, layers: list[bytes], created: str) -> Path:
    diff_ids = ["sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {"Env": ["PATH=/usr/bin"]},
        "history": [
            {"created": created, "created_by": "ADD rootfs"},
            {"created": created, "created_by": "ENV A=1", "empty_layer": True},
            *[{"created": created, "created_by": f"RUN step {i}"} for i in range(1, len(layers))],
        ],
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    members = {"config.json": json.dumps(config).encode()}
    members |= {f"l{i}/layer.tar": layer for i, layer in enumerate(layers)}
    members["manifest.json"] = json.dumps(
        [{"Config": "config.json", "Layers": [f"l{i}/layer.tar" for i in range(len(layers))]}]
    ).encode()
    return save_archive(path, members)


VENV = _layer({"opt/venv/lib/torch/__init__.py": b"x = 1\n"}, 0)


def _image(tmp_path: Path, name: str, when: float, log: bytes = b"") -> Path:
    os_layer = _layer(
        {"etc/os-release": b"ID=debian\n", "var/lib/dpkg/status": b"Package: a\n" + log}, when, atime=True
    )
    return _saved(tmp_path / f"{name}.tar", [os_layer, VENV], iso(int(when)))


def test_two_builds_at_different_times_give_one_digest(tmp_path: Path) -> None:
    a = normalize_saved(_image(tmp_path, "a", 1_800_000_000.25), tmp_path / "a", EPOCH)
    b = normalize_saved(_image(tmp_path, "b", 1_800_000_777.5), tmp_path / "b", EPOCH)
    assert a.digest == b.digest and a.manifest == b.manifest and a.config == b.config
    assert [x.blob.path.read_bytes() for x in a.layers] == [x.blob.path.read_bytes() for x in b.layers]


def test_the_config_and_manifest_say_the_epoch_and_the_new_layers(tmp_path: Path) -> None:
    image = normalize_saved(_image(tmp_path, "a", 1_800_000_000), tmp_path / "a", EPOCH)
    config = json.loads(image.config)
    assert config["created"] == "2026-01-01T00:00:00Z"
    assert {h["created"] for h in config["history"]} == {"2026-01-01T00:00:00Z"}
    assert config["rootfs"]["diff_ids"] == [x.diff_id for x in image.layers]
    assert [x.created_by for x in image.layers] == ["ADD rootfs", "RUN step 1"]  # the empty_layer entry skipped
    manifest = json.loads(image.manifest)
    assert manifest["mediaType"] == MANIFEST_TYPE
    assert [(x["mediaType"], x["digest"]) for x in manifest["layers"]] == [
        (LAYER_TYPE, x.blob.digest) for x in image.layers
    ]
    assert manifest["config"]["digest"] == "sha256:" + hashlib.sha256(image.config).hexdigest()


def test_times_are_clamped_not_erased_and_volatile_pax_records_go(tmp_path: Path) -> None:
    image = normalize_saved(_image(tmp_path, "a", 1_800_000_000), tmp_path / "a", EPOCH)
    os_layer = image.layers[0]
    assert os_layer.changed
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(os_layer.blob.path.read_bytes()))) as tar:
        members = tar.getmembers()
    assert {m.mtime for m in members} == {EPOCH}
    assert all("atime" not in m.pax_headers and "ctime" not in m.pax_headers for m in members)
    early = normalize_saved(_image(tmp_path, "early", 1_000_000_000), tmp_path / "early", EPOCH)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(early.layers[0].blob.path.read_bytes()))) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1_000_000_000}  # before the epoch: kept


def test_a_content_only_layer_keeps_its_bytes_and_diff_id(tmp_path: Path) -> None:
    image = normalize_saved(_image(tmp_path, "a", 1_800_000_000), tmp_path / "a", EPOCH)
    venv = image.layers[1]
    assert not venv.changed
    assert venv.diff_id == "sha256:" + hashlib.sha256(VENV).hexdigest()
    assert gzip.decompress(venv.blob.path.read_bytes()) == VENV
    assert venv.blob.path.read_bytes()[4:8] == b"\0\0\0\0"  # no time in the gzip header


def test_content_that_differs_is_found_with_its_file(tmp_path: Path) -> None:
    a = normalize_saved(_image(tmp_path, "a", 1_800_000_000, b"Log: 10:01\n"), tmp_path / "a", EPOCH)
    b = normalize_saved(_image(tmp_path, "b", 1_800_000_000, b"Log: 10:02\n"), tmp_path / "b", EPOCH)
    assert a.digest != b.digest
    assert a.layers[1].diff_id == b.layers[1].diff_id
    files_a = layer_files(a.layers[0].blob.path.with_name("layer-000.normal.tar"))
    files_b = layer_files(b.layers[0].blob.path.with_name("layer-000.normal.tar"))
    assert sorted(p for p in files_a if files_a[p] != files_b[p]) == ["var/lib/dpkg/status"]
    assert differing_layers(a, b) == ["layer 0 (ADD rootfs): var/lib/dpkg/status"]
    assert differing_layers(a, a) == []
    layer_tar(b.layers[0]).unlink()
    assert differing_layers(a, b) == ["layer 0 (ADD rootfs): its tars were not kept, files not compared"]


# -- in the build pipeline: SOURCE_DATE_EPOCH pushes the normalized image -----------------------------------------


def test_with_an_epoch_the_pipeline_pushes_the_normalized_image_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wall_off_the_engine(monkeypatch)
    p = plan("torch2.14.1-cu130-py3.11-debian12")
    net = Net()
    memory = MemoryRegistry("127.0.0.1:5000").attach(net)
    registry = Registry(client=Distribution(net.http()))
    engine = FakeEngine(contents_of(p))
    saved: list[str] = []

    def save(ref: str, path: Path) -> None:
        saved.append(ref)
        _image(path.parent, "image", 1_800_000_000).rename(path)

    setattr(engine, "save", save)  # noqa: B010  a save of real layers
    settings = BuildSettings(repo="127.0.0.1:5000/t", flavors=(Flavor.RUNTIME,), out_dir=tmp_path / "ctx", push=True,
                             aliases=False, epoch=EPOCH)  # fmt: skip
    (outcome,) = build(engine, p, settings, lambda line: None, registry)
    expected = normalize_saved(_image(tmp_path, "again", 1_800_000_555), tmp_path / "again", EPOCH)
    assert outcome.digest == expected.digest  # another build's clock, the same digest
    assert engine.pushed() == [] and saved == [outcome.image_id]  # not `docker push`: torchyard's client
    tag = outcome.ref.rsplit(":", 1)[1]
    assert memory.manifests["t", tag][0] == expected.manifest
    assert {d for _, d in memory.uploads} == {x.blob.digest for x in expected.layers} | {
        "sha256:" + hashlib.sha256(expected.config).hexdigest()
    }
    sent = sum(len(memory.blobs[key]) for key in memory.uploads) + len(expected.manifest)
    assert outcome.pushed_bytes == sent  # what torchyard's client sent (issue 44 item 7)


def test_the_base_image_layers_are_kept_as_they_are(tmp_path: Path) -> None:
    saved = _image(tmp_path, "a", 1_800_000_000)
    with tarfile.open(saved) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    config = json.loads(members["config.json"])
    config["history"][2]["comment"] = "buildkit.dockerfile.v0"  # the first step of this build makes layer 1
    members["config.json"] = json.dumps(config).encode()
    save_archive(saved, members)
    image = normalize_saved(saved, tmp_path / "out", EPOCH)
    assert not image.layers[0].changed  # the base's, though its times are after the epoch
    assert gzip.decompress(image.layers[0].blob.path.read_bytes()) == members["l0/layer.tar"]


def test_a_save_from_containerd_s_store_with_compressed_layers_normalizes_alike(tmp_path: Path) -> None:
    """Docker's containerd image store saves the registry's blobs (gzip, or zstd), not plain tars: the same
    content gives the same normalized image."""
    import zstandard

    plain = normalize_saved(_image(tmp_path, "plain", 1_800_000_000), tmp_path / "plain-oci", EPOCH)
    os_layer = _layer({"etc/os-release": b"ID=debian\n", "var/lib/dpkg/status": b"Package: a\n"}, 1_800_000_000,
                      atime=True)  # fmt: skip
    packed = [gzip.compress(os_layer, mtime=0), zstandard.ZstdCompressor().compress(VENV)]
    saved = _saved(tmp_path / "containerd.tar", packed, iso(1_800_000_000))
    assert normalize_saved(saved, tmp_path / "containerd-oci", EPOCH).manifest == plain.manifest
