"""Small real images written straight through the registry API (no engine needed): one gzipped layer,
a config with a platform and labels, a Docker v2 manifest. Pullable by the engine."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass

from builder.net.http import Http, Policy
from builder.oci.client import DOCKER_MANIFEST, Distribution
from builder.oci.refs import RepoRef

LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"


def local_client() -> Distribution:
    """A client of the local registries without credentials (:5000), not reading the docker CLI's logins."""
    return Distribution(Http(Policy(timeout=30)), None, docker_login=False)


@dataclass(frozen=True)
class Pushed:
    repo: RepoRef
    tag: str
    digest: str
    blobs: tuple[str, ...]
    layer_bytes: int

    @property
    def ref(self) -> str:
        return f"{self.repo}:{self.tag}"


def layer(text: str) -> tuple[bytes, str]:
    """A gzipped tar with one file; returns (blob, diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("torchyard-test.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return gzip.compress(tar_bytes, mtime=0), "sha256:" + hashlib.sha256(tar_bytes).hexdigest()


def push_image(
    client: Distribution, repo: RepoRef, tag: str, *, arch: str = "amd64", labels: dict[str, str] | None = None
) -> Pushed:
    blob, diff_id = layer(f"{repo} {tag} {arch}\n")
    config = json.dumps(
        {
            "architecture": arch,
            "os": "linux",
            "config": {"Labels": labels or {}, "Cmd": ["/torchyard-test.txt"]},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "torchyard tests"}],
        },
        sort_keys=True,
    ).encode()
    layer_digest = client.upload(repo, blob)
    config_digest = client.upload(repo, config)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(blob)}],
        }
    ).encode()
    digest = client.put_manifest(repo, tag, manifest, DOCKER_MANIFEST)
    return Pushed(repo, tag, digest, (config_digest, layer_digest), len(blob) + len(config))
