"""The zstd copy in the docker tier: `torchyard promote SRC DST --zstd` against the local registry, then
containerd (`ctr`, a containerd of the test's own) pulls both the gzip image and its zstd copy cold and
unpacks them: the zstd layers decompress to the diff_ids of the unchanged config, layer by layer (the
snapshots are keyed by their chain IDs), as the gzip ones do."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
import uuid
from collections.abc import Iterator

import pytest
import requests
from ctr_kit import Ctr, chain_ids, containerd
from kit import REGISTRY, torchyard

from builder.net.http import Http
from builder.oci.client import DOCKER_MANIFEST, OCI_MANIFEST, Distribution, digest_of
from builder.oci.refs import RepoRef
from builder.oci.zstd import MADE_FROM, ZSTD_LAYER

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:8]
SRC = RepoRef(REGISTRY, f"pull-{RUN}/candidates")
DST = f"{REGISTRY}/pull-{RUN}/public:1.0-runtime"


def _tar(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _push_source() -> list[str]:
    """A two-layer image (17 MiB of noise: its zstd blob goes up in two chunks; then a small text layer); its
    diff_ids."""
    tars = [
        _tar({"opt/noise.bin": random.Random(4).randbytes(17 * 1024 * 1024)}),
        _tar({"etc/torchyard.txt": b"zstd copy\n" * 100}),
    ]
    client = Distribution(Http(), docker_login=False)
    layers = []
    for tar in tars:
        blob = gzip.compress(tar, compresslevel=6, mtime=0)
        layers.append(
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "digest": client.upload(SRC, blob),
                "size": len(blob),
            }
        )
    diff_ids = [digest_of(t) for t in tars]
    config = json.dumps(
        {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    ).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "digest": client.upload(SRC, config),
            "size": len(config),
        },
        "layers": layers,
    }
    client.put_manifest(SRC, "1.0-runtime", json.dumps(manifest).encode(), DOCKER_MANIFEST)
    return diff_ids


@pytest.fixture(scope="module")
def ctr() -> Iterator[Ctr]:
    with containerd() as running:
        yield running


def _manifest(tag: str) -> tuple[str, dict[str, object]]:
    """(digest, content) of a manifest as the registry serves it."""
    accept = f"{OCI_MANIFEST}, {DOCKER_MANIFEST}"
    got = requests.get(
        f"http://{REGISTRY}/v2/pull-{RUN}/public/manifests/{tag}", headers={"Accept": accept}, timeout=30
    )
    assert got.status_code == 200, got.text
    data: dict[str, object] = got.json()
    return digest_of(got.content), data


def test_a_promoted_image_gets_a_zstd_copy_that_containerd_pulls_and_unpacks_to_the_same_layers(ctr: Ctr) -> None:
    diff_ids = _push_source()
    run = torchyard("promote", f"{SRC}:1.0-runtime", DST, "--zstd")
    assert run.code == 0, run.text
    assert "2 layers recompressed, 0 already there" in run.out
    (gzip_digest, gzip_manifest), (_, zstd_manifest) = _manifest("1.0-runtime"), _manifest("1.0-runtime-zstd")
    assert zstd_manifest["mediaType"] == OCI_MANIFEST
    layers = zstd_manifest["layers"]
    assert isinstance(layers, list) and [layer["mediaType"] for layer in layers] == [ZSTD_LAYER, ZSTD_LAYER]
    config, gzip_config = zstd_manifest["config"], gzip_manifest["config"]
    assert isinstance(config, dict) and isinstance(gzip_config, dict) and config["digest"] == gzip_config["digest"]
    assert zstd_manifest["annotations"] == {MADE_FROM: gzip_digest}
    for namespace, tag in (("zstd", "1.0-runtime-zstd"), ("gzip", "1.0-runtime")):
        pulled = ctr.pull(namespace, f"{DST.rsplit(':', 1)[0]}:{tag}")
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert set(chain_ids(diff_ids)) <= ctr.snapshots(namespace), namespace
    again = torchyard("promote", f"{SRC}:1.0-runtime", DST, "--zstd")
    assert again.code == 0 and "already is the zstd copy" in again.out, again.text
