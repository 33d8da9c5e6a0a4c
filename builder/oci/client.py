"""A client of the OCI distribution API (Docker Registry HTTP API v2): manifests and indexes for any
platform, config blobs, blob mounts and uploads, manifest writes. Every request goes through one
Http (retries, timeout, budget, counters, optional cache) and one Authenticator (basic, bearer)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from builder.core.errors import PushError, UpstreamError
from builder.engine import RegistryAuth
from builder.net.cache import CacheKind
from builder.net.http import Http, Reply
from builder.oci.auth import Authenticator, parse_challenge
from builder.oci.refs import RepoRef, normalize_platform, platform_of

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
ACCEPT = ", ".join(MANIFEST_TYPES)
BIG_BLOB = 64 * 1024 * 1024  # copied through a temporary file above this size, in memory below


@dataclass(frozen=True)
class Manifest:
    """A manifest or an index exactly as the registry holds it (raw bytes: their sha256 is the digest)."""

    media_type: str
    digest: str
    raw: bytes
    data: dict[str, Any]

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES or "manifests" in self.data

    def entries(self) -> list[dict[str, Any]]:
        """An index's per-platform manifests, attestations (unknown/unknown) left out."""
        found = self.data.get("manifests") or []
        return [e for e in found if platform_of(e) != "unknown/unknown"]

    def blobs(self) -> list[dict[str, Any]]:
        """An image manifest's config and layers (descriptors with digest, size, mediaType)."""
        config = self.data.get("config")
        return ([config] if config else []) + list(self.data.get("layers") or [])


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Distribution:
    def __init__(self, http: Http | None = None, auth: RegistryAuth | None = None, *, docker_login: bool = True):
        self.http = http or Http()
        self.auth = Authenticator(self.http, auth, use_docker_login=docker_login)

    # --- reading ------------------------------------------------------------------------------------

    def manifest(self, repo: RepoRef, reference: str, *, cache: bool = False) -> Manifest | None:
        """The manifest or index under a tag or digest; None when the registry does not have it."""
        kind = (CacheKind.IMMUTABLE if reference.startswith("sha256:") else CacheKind.MUTABLE) if cache else None
        reply = self._call("GET", repo, f"{repo.base}/manifests/{reference}", _pull(repo), accept=ACCEPT, cache=kind)
        if reply.status == 404:
            return None
        self._check(reply, repo, "read")
        digest = digest_of(reply.body)
        if reference.startswith("sha256:") and reference != digest:
            raise PushError(f"registry {repo.host} answered {repo.name}@{reference} with content of {digest}")
        try:
            data = json.loads(reply.body)
        except ValueError:
            raise PushError(f"registry {repo.host} answered a manifest of {repo.name} that is not JSON") from None
        media_type = str(data.get("mediaType") or (reply.header("content-type") or "").split(";")[0])
        return Manifest(media_type, digest, reply.body, data)

    def blob_json(self, repo: RepoRef, digest: str, *, cache: bool = False) -> dict[str, Any]:
        kind = CacheKind.IMMUTABLE if cache else None
        url = f"{repo.base}/blobs/{digest}"
        reply = self._call("GET", repo, url, _pull(repo), accept="application/json", cache=kind)
        self._check(reply, repo, "read")
        if digest_of(reply.body) != digest:
            raise PushError(f"registry {repo.host} answered blob {digest} of {repo.name} with other content")
        data: dict[str, Any] = json.loads(reply.body)
        return data

    def platforms(self, repo: RepoRef, reference: str, *, cache: bool = False) -> dict[str, str] | None:
        """{platform: image manifest digest} under a tag or digest; None when it does not exist.
        A single-platform image names its platform in its config blob."""
        found = self.manifest(repo, reference, cache=cache)
        if found is None:
            return None
        if found.is_index:
            return {platform_of(e): str(e["digest"]) for e in found.entries()}
        config = self.blob_json(repo, str(found.data["config"]["digest"]), cache=cache) if found.blobs() else {}
        return {platform_of(config): found.digest}

    def image(self, repo: RepoRef, reference: str, platform: str) -> tuple[Manifest, dict[str, Any]] | None:
        """The image manifest and config of one platform under a tag; None when the tag does not exist.
        PushError when the tag exists without that platform."""
        found = self.manifest(repo, reference)
        if found is None:
            return None
        if found.is_index:
            wanted = normalize_platform(platform)
            digest = next((str(e["digest"]) for e in found.entries() if platform_of(e) == wanted), None)
            if digest is None:
                raise PushError(f"the registry holds no {wanted} image under this tag")
            found = self.manifest(repo, digest)
            if found is None:
                raise PushError(f"registry {repo.host} lists {repo.name}@{digest} in an index but does not have it")
        config = found.data.get("config") or {}
        if not config.get("digest"):
            return found, {}
        return found, self.blob_json(repo, str(config["digest"]))

    def blob_exists(self, repo: RepoRef, digest: str, *, push: bool = False) -> bool:
        scopes = _push(repo) if push else _pull(repo)
        reply = self._call("HEAD", repo, f"{repo.base}/blobs/{digest}", scopes)
        if reply.status == 404:
            return False
        self._check(reply, repo, "read")
        return True

    # --- writing ------------------------------------------------------------------------------------

    def put_manifest(self, repo: RepoRef, reference: str, raw: bytes, media_type: str) -> str:
        """Store a manifest or index under a tag (or its digest); returns the digest the registry gives it."""
        headers = {"Content-Type": media_type}
        url = f"{repo.base}/manifests/{reference}"
        reply = self._call("PUT", repo, url, _push(repo), headers=headers, data=raw)
        self._check(reply, repo, "write")
        digest = reply.header("docker-content-digest") or digest_of(raw)
        if digest != digest_of(raw):
            raise PushError(f"registry {repo.host} stored {repo.name}:{reference} as {digest}, not {digest_of(raw)}")
        return digest

    def mount(self, source: RepoRef, target: RepoRef, digest: str) -> str | None:
        """Cross-repository blob mount (same registry). None when mounted; else the upload location the
        registry opened instead (it could not mount: the blob is then uploaded there)."""
        scopes = (*_push(target), *_pull(source))
        url = f"{target.base}/blobs/uploads/"
        reply = self._call("POST", target, url, scopes, params={"mount": digest, "from": source.name})
        if reply.status == 201:
            return None
        self._check(reply, target, "write")
        return self._location(target, reply)

    def upload(self, repo: RepoRef, data: bytes, *, location: str | None = None) -> str:
        """A blob uploaded in one request (monolithic upload); returns its digest."""
        digest = digest_of(data)
        self._finish_upload(repo, location or self._start_upload(repo), digest, data)
        return digest

    def upload_file(self, repo: RepoRef, path: Path, digest: str) -> None:
        """A blob streamed from a file (layers of GBs are not read into memory); `digest` is its sha256."""
        with path.open("rb") as data:
            self._finish_upload(repo, self._start_upload(repo), digest, data)

    def copy_blob(self, source: RepoRef, target: RepoRef, descriptor: Mapping[str, Any], location: str | None) -> int:
        """Copy a blob between registries (no mount possible): streamed through a temporary file above
        BIG_BLOB bytes. Returns the bytes moved."""
        digest, size = str(descriptor["digest"]), int(descriptor.get("size") or 0)
        url = f"{source.base}/blobs/{digest}"
        head = self._call("HEAD", source, url, _pull(source))  # also fetches the token the GET needs
        self._check(head, source, "read")
        headers = self.auth.headers(source.host, _pull(source))
        with tempfile.SpooledTemporaryFile(max_size=BIG_BLOB) as spool:
            hasher = hashlib.sha256()
            try:
                with self.http.stream("GET", url, headers=headers, auth=self.auth.basic(source.host, headers)) as got:
                    if not got.ok:
                        raise PushError(f"registry {source.host} answered HTTP {got.status_code} for {url}")
                    for chunk in got.iter_content(1024 * 1024):
                        hasher.update(chunk)
                        spool.write(chunk)
            except UpstreamError as exc:
                if isinstance(exc, PushError):
                    raise
                raise PushError(f"registry {source.host} is unreachable: {getattr(exc, 'reason', exc)}") from None
            if "sha256:" + hasher.hexdigest() != digest:
                raise PushError(f"registry {source.host} answered blob {digest} with other content")
            moved = spool.tell()
            self.http.counters.add(bytes=moved)
            spool.seek(0)
            self._finish_upload(target, location or self._start_upload(target), digest, spool)
        return moved or size

    # --- internals ----------------------------------------------------------------------------------

    def _start_upload(self, repo: RepoRef) -> str:
        reply = self._call("POST", repo, f"{repo.base}/blobs/uploads/", _push(repo))
        self._check(reply, repo, "write")
        return self._location(repo, reply)

    def _finish_upload(self, repo: RepoRef, location: str, digest: str, data: Any) -> None:
        separator = "&" if "?" in location else "?"
        headers = {"Content-Type": "application/octet-stream"}
        url = f"{location}{separator}digest={digest}"
        reply = self._call("PUT", repo, url, _push(repo), headers=headers, data=data)
        self._check(reply, repo, "write")

    def _location(self, repo: RepoRef, reply: Reply) -> str:
        location = reply.header("location")
        if not location:
            raise PushError(f"registry {repo.host} opened an upload to {repo.name} without a Location")
        return urljoin(repo.base, location)

    def _call(
        self,
        method: str,
        repo: RepoRef,
        url: str,
        scopes: tuple[str, ...],
        *,
        accept: str | None = None,
        headers: Mapping[str, str] | None = None,
        data: Any = None,
        params: Mapping[str, str] | None = None,
        cache: CacheKind | None = None,
    ) -> Reply:
        base = dict(headers or {}) | ({"Accept": accept} if accept else {})
        try:
            sent = base | self.auth.headers(repo.host, scopes)
            reply = self.http.request(
                method, url, headers=sent, data=data, params=params, auth=self.auth.basic(repo.host, sent), cache=cache
            )
            challenge = parse_challenge(reply.header("www-authenticate")) if reply.status == 401 else None
            if challenge is not None and self.auth.answer(repo.host, scopes, challenge):
                sent = base | self.auth.headers(repo.host, scopes)
                reply = self.http.request(method, url, headers=sent, data=data, params=params, cache=cache)
        except UpstreamError as exc:
            if isinstance(exc, PushError):
                raise
            raise PushError(f"registry {repo.host} is unreachable: {getattr(exc, 'reason', exc)}") from None
        return reply

    @staticmethod
    def _check(reply: Reply, repo: RepoRef, what: str) -> None:
        if reply.status in (401, 403):
            raise PushError(
                f"registry {repo.host} refused to {what} {repo.name} (HTTP {reply.status}): "
                f"give credentials with --registry-user / TORCHYARD_REGISTRY_PASSWORD, or docker login {repo.host}"
            )
        if not reply.ok:
            raise PushError(f"registry {repo.host} answered HTTP {reply.status} for {reply.url}")


def _pull(repo: RepoRef) -> tuple[str, ...]:
    return (f"repository:{repo.name}:pull",)


def _push(repo: RepoRef) -> tuple[str, ...]:
    return (f"repository:{repo.name}:pull,push",)
