"""builder/oci/normalize.py where mutation testing found no test holding it (issue 24): the manifest's and the
config's exact bytes (sorted keys, no spaces, each field's name), the gzip of a layer (level 6, no name, no
time), which layers change (a time after the epoch or a volatile PAX record, not a time at the epoch), links and
folders in a layer, a save whose history is shorter than its layers, the output folder, the lines
`differing_layers` writes, and what `push_normal` sends (each blob the registry lacks, with the push scope, the
config even of an image without layers, the manifest with its media type)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tarfile
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_kit import Net
from registry_kit import MemoryRegistry, ScopedRegistry, save_archive

from builder.oci import normalize as nz
from builder.oci.client import Distribution
from builder.oci.refs import parse_repo

EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z
STAMP = "2026-01-01T00:00:00Z"
LATE = EPOCH + 3_600
EARLY = EPOCH - 3_600
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(
    name: str,
    data: bytes = b"",
    *,
    mtime: float = EARLY,
    kind: bytes = tarfile.REGTYPE,
    link: str = "",
    mode: int = 0o644,
    owner: tuple[int, int] = (0, 0),
    pax: dict[str, str] | None = None,
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mtime, info.mode = kind, link, mtime, mode
    info.uid, info.gid = owner
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.pax_headers = dict(pax or {})
    return info, data


def tar_of(*entries: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def gzip_of(data: bytes) -> bytes:
    """RFC 1952 written out: no flags, time 0, XFL 0 (neither level 1 nor 9), OS 255 (unknown), a raw deflate
    stream at level 6, the CRC-32 and the size."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    return b"\x1f\x8b\x08\x00" + b"\0\0\0\0" + b"\x00\xff" + body + struct.pack("<II", zlib.crc32(data), len(data))


def saved(
    path: Path, layers: list[bytes], history: list[dict[str, Any]] | None, extra: dict[str, bytes] | None = None
) -> Path:
    """A `docker save` archive of one image: config.json (with `history` where given), l<n>/layer.tar."""
    config: dict[str, Any] = {"os": "linux", "architecture": "amd64", "created": "2030-05-05T05:05:05Z"}
    if history is not None:
        config["history"] = history
    members = {"config.json": json.dumps(config).encode()} | (extra or {})
    members |= {f"l{i}/layer.tar": layer for i, layer in enumerate(layers)}
    index = [{"Config": "config.json", "Layers": [f"l{i}/layer.tar" for i in range(len(layers))]}]
    members["manifest.json"] = json.dumps(index).encode()
    return save_archive(path, members)


def step(created_by: str) -> dict[str, Any]:
    return {"created": "2030-05-05T05:05:05Z", "created_by": created_by}


def members_of(tar_bytes: bytes) -> list[tuple[str, bytes, str, int, dict[str, str]]]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        return [(m.name, m.type, m.linkname, int(m.mtime), dict(m.pax_headers)) for m in tar.getmembers()]


OLD = tar_of(entry("etc/os-release", b"ID=debian\n"), entry("etc/hostname", b"box\n"))
LATE_LAYER = tar_of(entry("app/main.py", b"print(1)\n", mtime=LATE))


# --- the manifest, the config, the gzip ---------------------------------------------------------------------------


def test_the_manifest_s_bytes_are_sorted_compact_oci_json_over_the_gzip_layers_and_the_config(tmp_path: Path) -> None:
    text = "".join(f"line {i} {i * i % 97} {i % 7}\n" for i in range(2000)).encode()  # levels 6 and 7 differ on it
    second = tar_of(entry("opt/venv/log.txt", text))
    image = nz.normalize_saved(
        saved(tmp_path / "s.tar", [OLD, second], [step("ADD a"), step("RUN b")]), tmp_path / "o", EPOCH
    )
    diff_ids = [sha(OLD), sha(second)]  # times before the epoch: both kept as they were
    config = (
        '{"architecture":"amd64","created":"2026-01-01T00:00:00Z","history":['
        '{"created":"2026-01-01T00:00:00Z","created_by":"ADD a"},'
        '{"created":"2026-01-01T00:00:00Z","created_by":"RUN b"}],'
        f'"os":"linux","rootfs":{{"diff_ids":["{diff_ids[0]}","{diff_ids[1]}"],"type":"layers"}}}}'
    ).encode()
    assert image.config == config
    blobs = [gzip_of(OLD), gzip_of(second)]
    layers = ",".join(f'{{"digest":"{sha(b)}","mediaType":"{LAYER_TYPE}","size":{len(b)}}}' for b in blobs)
    manifest = (
        f'{{"config":{{"digest":"{sha(config)}","mediaType":"{CONFIG_TYPE}","size":{len(config)}}},'
        f'"layers":[{layers}],"mediaType":"{MANIFEST_TYPE}","schemaVersion":2}}'
    ).encode()
    assert image.manifest == manifest
    assert image.digest == sha(manifest)
    assert [x.blob.path.read_bytes() for x in image.layers] == blobs
    assert [(x.blob.digest, x.blob.size, x.diff_id) for x in image.layers] == [
        (sha(b), len(b), d) for b, d in zip(blobs, diff_ids, strict=True)
    ]
    assert (tmp_path / "o" / "config.json").read_bytes() == config


def test_a_rewritten_layer_is_gzipped_alike_and_its_diff_id_is_that_of_the_rewritten_tar(tmp_path: Path) -> None:
    layer = tar_of(
        entry("usr/bin/tool", b"#!/bin/sh\necho hello\n" * 40, mtime=LATE, mode=0o755),
        entry("usr/share/doc", b"words and more words\n" * 90, mtime=EARLY, pax={"atime": "1", "ctime": "2"}),
    )
    expected = tar_of(
        entry("usr/bin/tool", b"#!/bin/sh\necho hello\n" * 40, mtime=EPOCH, mode=0o755),
        entry("usr/share/doc", b"words and more words\n" * 90, mtime=EARLY),
    )
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [layer], [step("RUN x")]), tmp_path / "o", EPOCH)
    (only,) = image.layers
    assert only.changed
    assert nz.layer_tar(only).read_bytes() == expected
    assert (only.diff_id, only.blob.digest, only.blob.size) == (
        sha(expected),
        sha(gzip_of(expected)),
        len(gzip_of(expected)),
    )
    assert only.blob.path.read_bytes() == gzip_of(expected)


def test_normal_config_keeps_every_other_field_and_stamps_each_history_entry() -> None:
    config: dict[str, Any] = {
        "os": "linux",
        "config": {"Env": ["B=2", "A=1"], "Cmd": ["python"]},
        "history": [{"created_by": "ENV A=1", "empty_layer": True, "created": "x"}, {"comment": "c"}],
        "rootfs": {"type": "old", "diff_ids": ["sha256:old"]},
        "architecture": "arm64",
    }
    assert nz.normal_config(config, EPOCH + 3_723, ["sha256:aa", "sha256:bb"]) == (
        b'{"architecture":"arm64","config":{"Cmd":["python"],"Env":["B=2","A=1"]},"created":"2026-01-01T01:02:03Z",'
        b'"history":[{"created":"2026-01-01T01:02:03Z","created_by":"ENV A=1","empty_layer":true},'
        b'{"comment":"c","created":"2026-01-01T01:02:03Z"}],"os":"linux",'
        b'"rootfs":{"diff_ids":["sha256:aa","sha256:bb"],"type":"layers"}}'
    )
    assert config["history"][0]["created"] == "x"  # the caller's config is left as it was


def test_a_config_without_history_gets_an_empty_one() -> None:
    assert nz.normal_config({"os": "linux"}, EPOCH, []) == (
        b'{"created":"2026-01-01T00:00:00Z","history":[],"os":"linux","rootfs":{"diff_ids":[],"type":"layers"}}'
    )


@pytest.fixture
def five_hours_west(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "EST+05")  # POSIX TZ: no time zone database needed
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("five_hours_west")
def test_the_time_stamp_is_utc_whatever_the_local_zone() -> None:
    assert time.strftime("%H", time.localtime(EPOCH)) == "19"  # the zone took: local time is 5 hours behind
    assert nz.iso(EPOCH + 3_723) == "2026-01-01T01:02:03Z"
    assert nz.iso(0) == "1970-01-01T00:00:00Z"


def test_a_blob_written_whole_is_described_by_its_path_digest_and_size(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    assert nz._write(path, b'{"a":1}') == nz.Blob(path, sha(b'{"a":1}'), 7)
    assert path.read_bytes() == b'{"a":1}'


def test_a_file_s_digest_is_read_in_pieces_not_whole(tmp_path: Path) -> None:
    data = bytes(range(256)) * (64 << 10)  # 16 MiB
    path = tmp_path / "big"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        digest = nz._sha256(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert digest == hashlib.sha256(data).hexdigest()
    assert peak < 8 << 20  # a few 1 MiB pieces, not the 16 MiB file


# --- which layers change --------------------------------------------------------------------------------------


def test_a_time_after_the_epoch_alone_changes_a_layer(tmp_path: Path) -> None:
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [LATE_LAYER], [step("COPY app")]), tmp_path / "o", EPOCH)
    (only,) = image.layers
    assert only.changed
    assert members_of(nz.layer_tar(only).read_bytes()) == [("app/main.py", tarfile.REGTYPE, "", EPOCH, {})]


def test_a_volatile_pax_record_alone_changes_a_layer(tmp_path: Path) -> None:
    layer = tar_of(entry("a", b"1", pax={"ctime": "5.5"}), entry("b", b"2"))
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [layer], [step("RUN x")]), tmp_path / "o", EPOCH)
    (only,) = image.layers
    assert only.changed
    assert nz.layer_tar(only).read_bytes() == tar_of(entry("a", b"1"), entry("b", b"2"))


def test_a_time_at_the_epoch_is_kept_byte_for_byte(tmp_path: Path) -> None:
    layer = tar_of(entry("a", b"1", mtime=EPOCH), entry("b", b"2"))
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [layer], [step("RUN x")]), tmp_path / "o", EPOCH)
    (only,) = image.layers
    assert not only.changed
    assert nz.layer_tar(only) == tmp_path / "o" / "layer-000.tar"
    assert nz.layer_tar(only).read_bytes() == layer
    assert (only.diff_id, only.blob.path.read_bytes()) == (sha(layer), gzip_of(layer))
    assert not (tmp_path / "o" / "layer-000.normal.tar").exists()


def test_links_and_folders_of_a_rewritten_layer_stay_as_they_were(tmp_path: Path) -> None:
    layer = tar_of(
        entry("opt", kind=tarfile.DIRTYPE, mode=0o755, mtime=LATE),
        entry("opt/python3.11", b"ELF", mtime=LATE, mode=0o755),
        entry("opt/python3", kind=tarfile.SYMTYPE, link="python3.11", mtime=LATE, mode=0o777),
        entry("opt/python", kind=tarfile.LNKTYPE, link="opt/python3.11", mtime=LATE, mode=0o755),
    )
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [layer], [step("RUN x")]), tmp_path / "o", EPOCH)
    (only,) = image.layers
    assert only.changed
    assert members_of(nz.layer_tar(only).read_bytes()) == [
        ("opt", tarfile.DIRTYPE, "", EPOCH, {}),
        ("opt/python3.11", tarfile.REGTYPE, "", EPOCH, {}),
        ("opt/python3", tarfile.SYMTYPE, "python3.11", EPOCH, {}),
        ("opt/python", tarfile.LNKTYPE, "opt/python3.11", EPOCH, {}),
    ]
    with tarfile.open(nz.layer_tar(only)) as tar:
        assert tar.extractfile("opt/python3.11").read() == b"ELF"  # type: ignore[union-attr]


def test_a_layer_saved_compressed_is_unpacked_not_kept_as_it_is(tmp_path: Path) -> None:
    """The graph driver's docker save holds tars, containerd's store its gzip blobs: unpacked first, a gzip one is
    neither pushed gzipped twice nor given the gzip's digest as its diff id."""
    packed = nz.normalize_saved(saved(tmp_path / "g.tar", [gzip.compress(OLD, mtime=0)], [step("RUN x")]),
                                tmp_path / "g", EPOCH)  # fmt: skip
    plain = nz.normalize_saved(saved(tmp_path / "p.tar", [OLD], [step("RUN x")]), tmp_path / "p", EPOCH)
    assert packed.manifest == plain.manifest
    assert packed.layers[0].diff_id != "sha256:" + hashlib.sha256(gzip.compress(OLD, mtime=0)).hexdigest()


def test_a_compressed_tar_is_not_rewritten(tmp_path: Path) -> None:
    source = tmp_path / "layer.tar"
    source.write_bytes(gzip.compress(LATE_LAYER, mtime=0))
    with pytest.raises(tarfile.ReadError):
        nz._rewrite(source, tmp_path / "layer.normal.tar", EPOCH)


def test_a_layer_is_normalized_unless_told_to_keep_it(tmp_path: Path) -> None:
    made = nz._layer(io.BytesIO(LATE_LAYER), tmp_path / "layer-000", EPOCH, "COPY app")
    assert (made.changed, made.created_by) == (True, "COPY app")
    kept = nz._layer(io.BytesIO(LATE_LAYER), tmp_path / "layer-001", EPOCH, "COPY app", keep=True)
    assert (kept.changed, kept.diff_id) == (False, sha(LATE_LAYER))


# --- the save archive ------------------------------------------------------------------------------------------


def test_layers_past_the_history_and_steps_without_created_by_are_made_by_nothing(tmp_path: Path) -> None:
    history = [{"created": "2030-05-05T05:05:05Z"}, step("RUN b") | {"empty_layer": True}]
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [OLD, OLD, OLD], history), tmp_path / "o", EPOCH)
    assert [x.created_by for x in image.layers] == ["", "", ""]


def test_a_save_without_history_is_normalized_all_the_same(tmp_path: Path) -> None:
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [LATE_LAYER, OLD], None), tmp_path / "o", EPOCH)
    assert [(x.changed, x.created_by) for x in image.layers] == [(True, ""), (False, "")]
    assert json.loads(image.config)["history"] == []


def test_a_config_that_names_a_folder_is_one_line(tmp_path: Path) -> None:
    archive = tmp_path / "s.tar"
    with tarfile.open(archive, "w") as tar:
        folder = tarfile.TarInfo("blobs")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        index = json.dumps([{"Config": "blobs", "Layers": []}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(index)
        tar.addfile(info, io.BytesIO(index))
    with pytest.raises(ValueError) as refused:
        nz.normalize_saved(archive, tmp_path / "o", EPOCH)
    assert str(refused.value) == "docker save archive: no file blobs"


def test_the_output_folder_is_made_with_its_parents_and_may_exist(tmp_path: Path) -> None:
    archive = saved(tmp_path / "s.tar", [LATE_LAYER], [step("COPY app")])
    first = nz.normalize_saved(archive, tmp_path / "a" / "b" / "out", EPOCH)
    again = nz.normalize_saved(archive, tmp_path / "a" / "b" / "out", EPOCH)
    assert first == again
    assert sorted(p.name for p in (tmp_path / "a" / "b" / "out").iterdir()) == [
        "config.json",
        "layer-000.normal.tar",
        "layer-000.tar",
        "layer-000.tar.gz",
    ]


# --- layer_tar, layer_files -----------------------------------------------------------------------------------


def test_layer_tar_names_the_rewritten_tar_of_a_changed_layer_and_the_engine_s_of_a_kept_one() -> None:
    blob = nz.Blob(Path("/out/layer-007.tar.gz"), "sha256:x", 1)
    assert nz.layer_tar(nz.Layer(blob, "sha256:d", True, "RUN x")) == Path("/out/layer-007.normal.tar")
    assert nz.layer_tar(nz.Layer(blob, "sha256:d", False, "RUN x")) == Path("/out/layer-007.tar")


def test_layer_files_says_content_link_target_or_kind_mode_and_owner(tmp_path: Path) -> None:
    path = tmp_path / "layer.tar"
    path.write_bytes(
        tar_of(
            entry("etc", kind=tarfile.DIRTYPE, mode=0o755),
            entry("etc/app.conf", b"debug = 0\n", mode=0o640, owner=(1000, 100)),
            entry("etc/link", kind=tarfile.SYMTYPE, link="app.conf", mode=0o777),
            entry("etc/hard", kind=tarfile.LNKTYPE, link="etc/app.conf", mode=0o640),
        )
    )
    assert nz.layer_files(path) == {
        "etc": "b'5'-> 755 0:0",
        "etc/app.conf": hashlib.sha256(b"debug = 0\n").hexdigest() + " 640 1000:100",
        "etc/link": "b'2'->app.conf 777 0:0",
        "etc/hard": "b'1'->etc/app.conf 640 0:0",
    }


def test_layer_files_reads_a_tar_not_a_gzip_blob(tmp_path: Path) -> None:
    path = tmp_path / "layer-000.tar.gz"
    path.write_bytes(gzip_of(OLD))
    with pytest.raises(tarfile.ReadError):
        nz.layer_files(path)


# --- differing_layers -----------------------------------------------------------------------------------------


def image_of(folder: Path, *layers: tuple[bytes, str]) -> nz.NormalImage:
    """A normalization's image as differing_layers reads it: each layer's tar kept where layer_tar says."""
    folder.mkdir()
    made = []
    for number, (tar, created_by) in enumerate(layers):
        (folder / f"layer-{number:03d}.tar").write_bytes(tar)
        blob = nz.Blob(folder / f"layer-{number:03d}.tar.gz", "sha256:unused", 0)
        made.append(nz.Layer(blob, sha(tar), False, created_by))
    return nz.NormalImage(b"{}", b"{}", tuple(made))


def files(**content: str) -> bytes:
    return tar_of(*(entry(name, text.encode()) for name, text in content.items()))


def test_a_differing_layer_after_an_equal_one_is_found(tmp_path: Path) -> None:
    a = image_of(tmp_path / "a", (OLD, "ADD rootfs"), (files(x="1"), "RUN one"), (files(y="1"), "RUN two"))
    b = image_of(tmp_path / "b", (OLD, "ADD rootfs"), (files(x="1"), "RUN one"), (files(y="2"), "RUN two"))
    assert nz.differing_layers(a, b) == ["layer 2 (RUN two): y"]


def test_files_in_one_layer_only_are_differences_too_listed_sorted(tmp_path: Path) -> None:
    a = image_of(tmp_path / "a", (files(b="1", a="1", c="1"), "RUN x"))
    b = image_of(tmp_path / "b", (files(a="2", b="1", d="1"), "RUN x"))
    assert nz.differing_layers(a, b) == ["layer 0 (RUN x): a, c, d"]


def test_the_first_twelve_differing_files_are_named(tmp_path: Path) -> None:
    names = [f"f{i:02d}" for i in range(13)]
    a = image_of(tmp_path / "a", (files(**dict.fromkeys(names, "a")), "RUN x"))
    b = image_of(tmp_path / "b", (files(**dict.fromkeys(names, "b")), "RUN x"))
    assert nz.differing_layers(a, b) == [f"layer 0 (RUN x): {', '.join(names[:12])}"]


def test_same_files_in_another_order_or_with_other_times_are_told_so(tmp_path: Path) -> None:
    a = image_of(tmp_path / "a", (tar_of(entry("p", b"1"), entry("q", b"2")), "RUN x"), (files(t="1"), "RUN y"))
    b = image_of(
        tmp_path / "b",
        (tar_of(entry("q", b"2"), entry("p", b"1")), "RUN x"),
        (tar_of(entry("t", b"1", mtime=EARLY - 1)), "RUN y"),
    )
    assert nz.differing_layers(a, b) == [
        "layer 0 (RUN x): entry order or headers",
        "layer 1 (RUN y): entry order or headers",
    ]


def test_the_step_is_cut_at_90_characters_and_every_differing_layer_is_told(tmp_path: Path) -> None:
    long = "RUN " + "x" * 86 + "TAIL"  # 94 characters
    a = image_of(tmp_path / "a", (files(p="1"), long), (files(q="1"), long))
    b = image_of(tmp_path / "b", (files(p="2"), long), (files(q="2"), long))
    cut = "RUN " + "x" * 86
    assert nz.differing_layers(a, b) == [f"layer 0 ({cut}): p", f"layer 1 ({cut}): q"]
    nz.layer_tar(b.layers[0]).unlink()
    assert nz.differing_layers(a, b) == [
        f"layer 0 ({cut}): its tars were not kept, files not compared",
        f"layer 1 ({cut}): q",
    ]


def test_images_with_different_numbers_of_layers_are_not_compared(tmp_path: Path) -> None:
    a = image_of(tmp_path / "a", (files(p="1"), "RUN x"))
    b = image_of(tmp_path / "b", (files(p="2"), "RUN x"), (files(q="1"), "RUN y"))
    with pytest.raises(ValueError, match=r"^zip\(\) argument 2 is longer than argument 1$"):
        nz.differing_layers(a, b)


# --- push_normal ----------------------------------------------------------------------------------------------

HOST = "127.0.0.1:5000"
REPO = parse_repo(f"{HOST}/team/t")


def registry() -> tuple[Net, MemoryRegistry, Distribution]:
    """A registry behind bearer tokens, each token naming the scopes it was asked for."""
    memory = MemoryRegistry(HOST)
    net = Net()
    ScopedRegistry(net, memory)
    return net, memory, Distribution(net.http(), docker_login=False)


def test_push_normal_uploads_what_the_registry_lacks_with_the_push_scope(tmp_path: Path) -> None:
    image = nz.normalize_saved(
        saved(tmp_path / "s.tar", [OLD, LATE_LAYER], [step("ADD a"), step("COPY app")]), tmp_path / "o", EPOCH
    )
    net, memory, client = registry()
    have = image.layers[0].blob
    memory.blobs["team/t", have.digest] = have.path.read_bytes()
    assert nz.push_normal(client, REPO, "v1", image) == image.digest
    config = sha(image.config)
    assert sorted(memory.uploads) == sorted([("team/t", image.layers[1].blob.digest), ("team/t", config)])
    assert memory.blobs["team/t", image.layers[1].blob.digest] == image.layers[1].blob.path.read_bytes()
    assert memory.blobs["team/t", config] == image.config
    assert memory.manifests["team/t", "v1"] == (image.manifest, MANIFEST_TYPE)
    heads = [s for s in net.sent if s.method == "HEAD"]
    assert sorted({s.path for s in heads}) == sorted(
        f"/v2/team/t/blobs/{d}" for d in (have.digest, image.layers[1].blob.digest, config)
    )
    assert {s.bearer for s in heads if s.bearer} == {"repository:team/t:pull,push"}


def test_push_normal_counts_the_bytes_it_sent_and_a_rerun_sends_only_the_manifest(tmp_path: Path) -> None:
    """Issue 44 item 7: the report's bytes pushed per item are what torchyard's client sent, not a guess."""
    image = nz.normalize_saved(
        saved(tmp_path / "s.tar", [OLD, LATE_LAYER], [step("ADD a"), step("COPY app")]), tmp_path / "o", EPOCH
    )
    _, _, client = registry()
    blobs = sum(x.blob.path.stat().st_size for x in image.layers) + len(image.config)
    assert nz.push_normal_counted(client, REPO, "v1", image) == (image.digest, blobs + len(image.manifest))
    assert nz.push_normal_counted(client, REPO, "v1", image) == (image.digest, len(image.manifest))


def test_push_normal_of_one_layer_sends_it_and_the_config(tmp_path: Path) -> None:
    image = nz.normalize_saved(saved(tmp_path / "s.tar", [OLD], [step("ADD a")]), tmp_path / "o", EPOCH)
    _, memory, client = registry()
    assert nz.push_normal(client, REPO, "v1", image) == image.digest
    assert sorted(memory.uploads) == sorted([("team/t", image.layers[0].blob.digest), ("team/t", sha(image.config))])


def test_push_normal_of_an_image_without_layers_sends_its_config(tmp_path: Path) -> None:
    """A `FROM scratch` image with metadata only: the manifest names a config the registry must hold first."""
    image = nz.normalize_saved(
        saved(tmp_path / "s.tar", [], [step("ENV A=1") | {"empty_layer": True}]), tmp_path / "o", EPOCH
    )
    _, memory, client = registry()
    assert nz.push_normal(client, REPO, "v1", image) == image.digest
    assert memory.uploads == [("team/t", sha(image.config))]
    assert memory.blobs["team/t", sha(image.config)] == image.config
    assert json.loads(image.manifest)["layers"] == []
