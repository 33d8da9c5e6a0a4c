"""An in-memory registry (distribution API v2) behind the fake network of http_kit: manifests by tag and
digest, blobs, uploads (POST + PUT, or POST + PATCH chunks + PUT, with the upload's status on GET),
cross-repository mounts; it records what it did.

Cuts: `cuts` lists counts of PATCH body bytes (all uploads together) at which the connection drops in the
middle of a chunk. The registry keeps the part it received (as the OCI spec lets a client find out with
GET), or, with `cancel_cut`, drops the whole upload as distribution 2.x does (its GET then answers 404)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from http_kit import Answer, Net, Sent, json_answer

from builder.oci.client import DOCKER_MANIFEST, digest_of

_PATH = re.compile(r"^/v2/(?P<name>.+?)/(?P<kind>manifests|blobs)/(?P<rest>.*)$")


@dataclass
class MemoryRegistry:
    host: str
    blobs: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (repo, digest)
    manifests: dict[tuple[str, str], tuple[bytes, str]] = field(default_factory=dict)  # (repo, ref) -> (raw, type)
    mountable: bool = True
    mounts: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, digest)
    uploads: list[tuple[str, str]] = field(default_factory=list)  # (repo, digest)
    referrers_api: bool = False  # True: an OCI 1.1 registry (OCI-Subject, GET /referrers/<digest>); False: 2.8's
    refuse_puts: bool = False  # every manifest PUT is answered 403 (a registry that refuses an upload)
    read_only: bool = False  # every upload is refused (405 UNSUPPORTED, as distribution's read-only mode answers)
    cancelled: list[str] = field(default_factory=list)  # upload sessions cancelled (DELETE)
    cuts: list[int] = field(default_factory=list)  # PATCH body bytes at which a connection drops
    cancel_cut: bool = False  # a cut upload is dropped whole (distribution 2.x), not kept up to the cut
    received: int = 0  # PATCH body bytes that reached the registry
    partial: dict[str, bytearray] = field(default_factory=dict)  # upload session -> bytes held
    _sessions: int = 0

    def attach(self, net: Net) -> MemoryRegistry:
        net.on(self.handle)
        return self

    def handle(self, sent: Sent) -> Answer | Exception | None:
        if not sent.url.startswith(f"http://{self.host}/v2/"):
            return None
        path = sent.path
        if path.endswith("/blobs/uploads/") and sent.method == "POST":
            return self._start(path[len("/v2/") : -len("/blobs/uploads/")], sent)
        if "/blobs/uploads/session-" in path:
            return self._session(path[len("/v2/") :].split("/blobs/uploads/"), sent)
        match = _PATH.match(path)
        if match is None:
            return self._referrers(path, sent)
        if match["kind"] == "blobs":
            blob = self.blobs.get((match["name"], match["rest"]))
            return Answer(200, blob, {"Docker-Content-Digest": match["rest"]}) if blob is not None else Answer(404, b"")
        return self._manifest(match["name"], match["rest"], sent)

    def _manifest(self, name: str, ref: str, sent: Sent) -> Answer:
        if sent.method == "PUT":
            if self.refuse_puts:
                return Answer(403, b"")
            digest = digest_of(sent.body)
            media = sent.headers.get("Content-Type", "")
            self.manifests[name, ref] = self.manifests[name, digest] = (sent.body, media)
            subject = (json.loads(sent.body).get("subject") or {}).get("digest") if self.referrers_api else None
            return Answer(201, b"", {"Docker-Content-Digest": digest} | ({"OCI-Subject": subject} if subject else {}))
        found = self.manifests.get((name, ref))
        if found is None:
            return Answer(404, b"")
        return Answer(200, found[0], {"Content-Type": found[1], "Docker-Content-Digest": digest_of(found[0])})

    def _referrers(self, path: str, sent: Sent) -> Answer:
        """GET /v2/<name>/referrers/<digest> where the registry has the API; 404 (an unknown route) where not."""
        if not self.referrers_api or "/referrers/" not in path or sent.method != "GET":
            return Answer(404, b"")
        name, subject = path[len("/v2/") :].split("/referrers/")
        found = []
        for (repo, ref), (raw, media) in self.manifests.items():
            data = json.loads(raw)
            if repo == name and ref.startswith("sha256:") and (data.get("subject") or {}).get("digest") == subject:
                entry = {"mediaType": media, "digest": ref, "size": len(raw), "artifactType": data.get("artifactType")}
                found.append(entry)
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": found}
        return Answer(200, json.dumps(index).encode(), {"Content-Type": "application/vnd.oci.image.index.v1+json"})

    def _session(self, parts: list[str], sent: Sent) -> Answer | requests.ConnectionError:
        name, session = parts
        held = self.partial.get(session)
        if held is None:
            return Answer(404, {"errors": [{"code": "BLOB_UPLOAD_UNKNOWN"}]})
        if sent.method == "PUT":
            return self._finish(name, sent)
        if sent.method == "PATCH":
            return self._patch(name, session, held, sent)
        if sent.method == "DELETE":
            del self.partial[session]
            self.cancelled.append(session)
            return Answer(204, b"")
        return self._status(name, session, held, 204)

    def _patch(self, name: str, session: str, held: bytearray, sent: Sent) -> Answer | requests.ConnectionError:
        start, _, end = sent.headers.get("Content-Range", "").partition("-")
        if int(start) != len(held) or int(end) - int(start) + 1 != len(sent.body):
            return Answer(416, b"")
        body = sent.body
        if self.cuts and self.received + len(body) > self.cuts[0]:
            body = body[: self.cuts.pop(0) - self.received]
            self.received += len(body)
            if self.cancel_cut:
                del self.partial[session]
            else:
                held += body
            return requests.ConnectionError("connection reset by peer (cut by the test)")
        self.received += len(body)
        held += body
        return self._status(name, session, held, 202)

    def _status(self, name: str, session: str, held: bytearray, status: int) -> Answer:
        headers = {"Location": f"/v2/{name}/blobs/uploads/{session}?_state={len(held)}"}
        return Answer(status, b"", headers | {"Range": f"0-{max(len(held) - 1, 0)}"})

    def _finish(self, name: str, sent: Sent) -> Answer:
        digest = sent.query["digest"][0]
        data = bytes(self.partial.pop(sent.path.rsplit("/", 1)[1])) + sent.body
        assert digest == digest_of(data), "uploaded bytes do not match the digest"
        self.blobs[name, digest] = data
        self.uploads.append((name, digest))
        return Answer(201, b"", {"Docker-Content-Digest": digest})

    def _start(self, name: str, sent: Sent) -> Answer:
        if self.read_only:
            return Answer(405, {"errors": [{"code": "UNSUPPORTED", "message": "The operation is unsupported."}]})
        mount, source = sent.query.get("mount", [None])[0], sent.query.get("from", [None])[0]
        if mount and source and self.mountable and (source, mount) in self.blobs:
            self.blobs[name, mount] = self.blobs[source, mount]
            self.mounts.append((source, name, mount))
            return Answer(201, b"", {"Location": f"/v2/{name}/blobs/{mount}"})
        self._sessions += 1
        self.partial[f"session-{self._sessions}"] = bytearray()
        return Answer(202, b"", {"Location": f"/v2/{name}/blobs/uploads/session-{self._sessions}?_state=0"})

    def add_image(self, name: str, tag: str, *, arch: str = "amd64", labels: dict[str, str] | None = None) -> str:
        config = json.dumps({"architecture": arch, "os": "linux", "config": {"Labels": labels or {}}}).encode()
        layer = hashlib.sha256(f"{name}{tag}{arch}".encode()).digest() * 100
        for blob in (config, layer):
            self.blobs[name, digest_of(blob)] = blob
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": DOCKER_MANIFEST,
                "config": {"mediaType": "application/json", "digest": digest_of(config), "size": len(config)},
                "layers": [{"mediaType": "x", "digest": digest_of(layer), "size": len(layer)}],
            }
        ).encode()
        digest = digest_of(manifest)
        self.manifests[name, tag] = self.manifests[name, digest] = (manifest, DOCKER_MANIFEST)
        return digest

    def add_index(self, name: str, tag: str, children: dict[str, str]) -> str:
        index: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": DOCKER_MANIFEST,
                    "digest": digest,
                    "size": len(self.manifests[name, digest][0]),
                    "platform": dict(zip(("os", "architecture"), platform.split("/"), strict=True)),
                }
                for platform, digest in children.items()
            ],
        }
        raw = json.dumps(index).encode()
        self.manifests[name, tag] = self.manifests[name, digest_of(raw)] = (raw, str(index["mediaType"]))
        return digest_of(raw)

    def add_gzip_image(self, name: str, tag: str, tars: list[bytes], *, arch: str = "amd64") -> str:
        """A real image: gzip layers of the given tars, a config whose diff_ids are their digests."""
        layers = []
        for tar in tars:
            blob = gzip.compress(tar, mtime=0)
            self.blobs[name, digest_of(blob)] = blob
            layers.append({"mediaType": GZIP_LAYER, "digest": digest_of(blob), "size": len(blob)})
        diff_ids = [digest_of(t) for t in tars]
        config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}})
        self.blobs[name, digest_of(config.encode())] = config.encode()
        docker_config = {"mediaType": DOCKER_CONFIG, "digest": digest_of(config.encode()), "size": len(config)}
        manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST, "config": docker_config, "layers": layers}
        raw = json.dumps(manifest).encode()
        self.manifests[name, tag] = self.manifests[name, digest_of(raw)] = (raw, DOCKER_MANIFEST)
        return digest_of(raw)


GZIP_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"


def tar_of(name: str, size: int) -> bytes:
    """A tar with one file of `size` bytes (a repeated digest of its name: compressible, different per name)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = size
        tar.addfile(info, io.BytesIO((hashlib.sha256(name.encode()).digest() * (size // 32 + 1))[:size]))
    return raw.getvalue()


def save_archive(path: Path, members: dict[str, bytes]) -> Path:
    """A tar file of plain members, as `docker save` writes one (config.json, l<n>/layer.tar, manifest.json)."""
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


class ScopedRegistry:
    """A MemoryRegistry behind a token service, as Docker Hub or GHCR: every request needs a bearer token whose
    scopes cover it (pull to read a repository, pull,push to write it, pull of the source of a mount)."""

    CHALLENGE = 'Bearer realm="https://auth.example/token",service="r"'

    def __init__(self, net: Net, registry: MemoryRegistry) -> None:
        self.registry = registry
        self.asked: list[tuple[str, ...]] = []  # the scope sets tokens were asked for, in order
        net.on(self.handle)

    def handle(self, sent: Sent) -> Answer | Exception | None:
        if sent.url.startswith("https://auth.example/"):
            self.asked.append(tuple(sent.query["scope"]))
            return json_answer({"token": " ".join(sent.query["scope"])})
        granted = set((sent.bearer or "").split())
        name = re.split(r"/(?:blobs|manifests|referrers)/", sent.path[len("/v2/") :])[0]
        needed = [f"repository:{name}:" + ("pull" if sent.method in ("GET", "HEAD") else "pull,push")]
        needed += [f"repository:{source}:pull" for source in sent.query.get("from", [])]
        if not all(n in granted or n + ",push" in granted for n in needed):
            return Answer(401, b"", {"WWW-Authenticate": self.CHALLENGE})
        return self.registry.handle(sent)
