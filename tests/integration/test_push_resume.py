"""Chunked, resumable blob pushes (builder/oci/upload.py) against the real local registry (Debian's
docker-registry 2.8) behind a proxy that cuts the connection in the middle of the upload and counts
every byte the client sent toward the registry (tests/integration/drop_proxy.py).

Two cuts, two behaviours of distribution 2.x (docs/publish.md says which registries do what):
- a connection lost between two chunks: the registry still holds the upload, answers its Range, and the
  push goes on from that byte (resent < one chunk);
- a connection cut in the middle of a chunk: distribution 2.x cancels the whole upload (its GET answers
  404 BLOB_UPLOAD_INVALID), so the client starts that blob again; the push still completes, correct.
"""

from __future__ import annotations

import hashlib
import io
import random
import uuid

import pytest
import requests
from drop_proxy import drop_proxy
from kit import REGISTRY

from builder.net.http import Http
from builder.oci.client import Distribution, digest_of
from builder.oci.refs import RepoRef
from builder.oci.upload import UploadPolicy

pytestmark = pytest.mark.docker

RUN = uuid.uuid4().hex[:8]
CHUNK = 8 * 1024 * 1024
BLOB = random.Random(21).randbytes(5 * CHUNK)  # 40 MiB: five chunks
HEADERS = 64 * 1024  # the requests' own bytes (headers of a few dozen requests), well above what they take


def _push_through(proxy_address: str, name: str) -> tuple[Distribution, RepoRef, int, int, int]:
    client = Distribution(Http(), docker_login=False, uploads=UploadPolicy(chunk=CHUNK, backoff=0.05))
    repo = RepoRef(proxy_address, f"pull-{RUN}/{name}")
    sent = client.upload_file(repo, io.BytesIO(BLOB), digest_of(BLOB), len(BLOB))
    return client, repo, sent.bytes, sent.resumed, sent.restarted


def _stored(name: str) -> str:
    """The digest of what the registry itself serves for the blob (not through the proxy)."""
    got = requests.get(f"http://{REGISTRY}/v2/pull-{RUN}/{name}/blobs/{digest_of(BLOB)}", timeout=60)
    assert got.status_code == 200
    return "sha256:" + hashlib.sha256(got.content).hexdigest()


def test_a_push_cut_between_chunks_goes_on_from_the_range_the_registry_holds() -> None:
    with drop_proxy(REGISTRY, cut_patches=(5,)) as proxy:  # the last chunk's PATCH: 80 % already there
        _, _, sent, resumed, restarted = _push_through(proxy.address, "between")
    assert (proxy.drops, resumed, restarted) == (1, 1, 0)
    assert proxy.sent < len(BLOB) + HEADERS  # nothing sent twice: the cut chunk never reached the registry
    assert sent == len(BLOB) + CHUNK  # the client's own count: the cut chunk, then again from the Range
    assert _stored("between") == digest_of(BLOB)


def test_a_push_cut_in_the_middle_of_a_chunk_completes_and_says_the_registry_started_over() -> None:
    mark = int(len(BLOB) * 0.9)
    with drop_proxy(REGISTRY, drops_at=(mark,)) as proxy:
        _, _, _, resumed, restarted = _push_through(proxy.address, "middle")
    assert (proxy.drops, resumed, restarted) == (1, 0, 1)  # distribution 2.x cancelled the cut upload
    assert mark + len(BLOB) <= proxy.sent < mark + len(BLOB) + HEADERS
    assert _stored("middle") == digest_of(BLOB)
