"""A client of the OCI distribution API (Docker Registry HTTP API v2): manifests and indexes for any
platform, config blobs, blob mounts and uploads, manifest writes. Every request goes through one
Http (retries, timeout, budget, counters, optional cache) and one Authenticator (basic, bearer)."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urljoin

from builder.core.errors import PushError, UpstreamError
from builder.engine import RegistryAuth
from builder.net.cache import CacheKind
from builder.net.http import Http, Reply, Unreachable
from builder.oci.auth import Authenticator, parse_challenge
from builder.oci.refs import RepoRef, normalize_platform, platform_of
from builder.oci.upload import Sent, UploadPolicy, upload_chunked

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
    def __init__(
        self,
        http: Http | None = None,
        auth: RegistryAuth | None = None,
        *,
        docker_login: bool = True,
        uploads: UploadPolicy | None = None,
    ):
        self.http = http or Http()
        self.auth = Authenticator(self.http, auth, use_docker_login=docker_login)
        self.uploads = uploads or UploadPolicy()

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

    def tags(self, repo: RepoRef, limit: int = 1000) -> list[str]:
        """The repository's tags (the first page of up to `limit`); [] when the repository does not exist."""
        reply = self._call("GET", repo, f"{repo.base}/tags/list", _pull(repo), params={"n": str(limit)})
        if reply.status == 404:
            return []
        self._check(reply, repo, "list the tags of")
        try:
            listed = json.loads(reply.body).get("tags") or []
        except (ValueError, AttributeError):
            raise PushError(f"registry {repo.host} answered the tags of {repo.name} with no tag list") from None
        return [str(tag) for tag in listed if isinstance(tag, str)]

    def every_tag(self, repo: RepoRef, page: int = 1000, pages: int = 50) -> list[str]:
        """All the repository's tags, a page at a time (the distribution spec's n and last): nvidia/cuda has
        thousands. PushError past `pages` pages, rather than a list that silently stops."""
        found: list[str] = []
        for _ in range(pages):
            params = {"n": str(page)} | ({"last": found[-1]} if found else {})
            reply = self._call("GET", repo, f"{repo.base}/tags/list", _pull(repo), params=params)
            if reply.status == 404:
                return found
            self._check(reply, repo, "list the tags of")
            try:
                listed = [str(t) for t in json.loads(reply.body).get("tags") or [] if isinstance(t, str)]
            except (ValueError, AttributeError):
                raise PushError(f"registry {repo.host} answered the tags of {repo.name} with no tag list") from None
            seen = set(found)
            fresh = [t for t in listed if t not in seen]
            found += fresh
            if len(listed) < page or not fresh or not reply.header("link"):
                return found
        raise PushError(f"registry {repo.host} lists more than {page * pages} tags of {repo.name}")

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

    def image(
        self, repo: RepoRef, reference: str, platform: str, *, top: Manifest | None = None
    ) -> tuple[Manifest, dict[str, Any]] | None:
        """The image manifest and config of one platform under a tag; None when the tag does not exist.
        PushError when the tag exists without that platform. `top`: the tag's manifest, already read."""
        found = top or self.manifest(repo, reference)
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
        return self.put_manifest_reply(repo, reference, raw, media_type)[0]

    def put_manifest_reply(self, repo: RepoRef, reference: str, raw: bytes, media_type: str) -> tuple[str, Reply]:
        """put_manifest, and the registry's reply (an OCI 1.1 registry answers a manifest with a subject with
        the header OCI-Subject)."""
        headers = {"Content-Type": media_type}
        url = f"{repo.base}/manifests/{reference}"
        reply = self._call("PUT", repo, url, _push(repo), headers=headers, data=raw)
        self._check(reply, repo, "write")
        digest = reply.header("docker-content-digest") or digest_of(raw)
        if digest != digest_of(raw):
            raise PushError(f"registry {repo.host} stored {repo.name}:{reference} as {digest}, not {digest_of(raw)}")
        return digest, reply

    def referrers(self, repo: RepoRef, digest: str) -> dict[str, Any] | None:
        """The OCI 1.1 referrers index of a manifest; None when the registry has no referrers API (404)."""
        url = f"{repo.base}/referrers/{digest}"
        reply = self._call("GET", repo, url, _pull(repo), accept=OCI_INDEX)
        if reply.status == 404 or not (reply.header("content-type") or "").startswith(OCI_INDEX):
            return None
        self._check(reply, repo, "read")
        data: dict[str, Any] = json.loads(reply.body)
        return data

    def blob(self, repo: RepoRef, digest: str) -> bytes:
        """A small blob's bytes (an SBOM, a signature payload), checked against its digest."""
        reply = self._call("GET", repo, f"{repo.base}/blobs/{digest}", _pull(repo))
        self._check(reply, repo, "read")
        if digest_of(reply.body) != digest:
            raise PushError(f"registry {repo.host} answered blob {digest} of {repo.name} with other content")
        return reply.body

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

    @contextmanager
    def stream_blob(self, repo: RepoRef, digest: str) -> Iterator[Iterator[bytes]]:
        """A blob's bytes as they arrive (1 MiB reads), unchecked: the caller hashes them. UpstreamError
        (Unreachable, or requests' own on a connection lost mid-body) as it comes."""
        url = f"{repo.base}/blobs/{digest}"
        head = self._call("HEAD", repo, url, _pull(repo))  # also fetches the token the GET needs
        self._check(head, repo, "read")
        headers = self.auth.headers(repo.host, _pull(repo))
        with self.http.stream("GET", url, headers=headers, auth=self.auth.basic(repo.host, headers)) as got:
            if not got.ok:
                raise PushError(f"registry {repo.host} answered HTTP {got.status_code} for {url}")
            yield self.http.chunks(got, 1024 * 1024)

    def upload_file(self, repo: RepoRef, data: IO[bytes], digest: str, size: int, location: str | None = None) -> Sent:
        """A blob from a seekable file: one request up to one chunk, else chunked and resumable
        (builder/oci/upload.py)."""
        if size > self.uploads.chunk:
            channel = _Channel(self, repo)
            return upload_chunked(
                channel, data, digest, size, location=location, policy=self.uploads, sleep=self.http.pause
            )
        data.seek(0)
        self._finish_upload(repo, location or self._start_upload(repo), digest, data)
        return Sent(bytes=size)

    def copy_blob(self, source: RepoRef, target: RepoRef, descriptor: Mapping[str, Any], location: str | None) -> int:
        """Copy a blob between registries (no mount possible): streamed through a temporary file above
        BIG_BLOB bytes. Returns the bytes moved."""
        digest = str(descriptor["digest"])
        with tempfile.SpooledTemporaryFile(max_size=BIG_BLOB) as spool:
            hasher = hashlib.sha256()
            try:
                with self.stream_blob(source, digest) as chunks:
                    for chunk in chunks:
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
            self.upload_file(target, spool, digest, moved, location)
        return moved  # what came, not what the descriptor says: a copy checks the digest, not the size

    def check_push(self, repo: RepoRef) -> None:
        """Whether the registry lets these credentials push to repo: an upload is opened (what a push does first,
        where a read-only registry or a missing permission says no) and cancelled at once, so a refusal is found
        before a build, not after it. PushError (exit 5) names the registry and what to give."""
        reply = self._call("POST", repo, f"{repo.base}/blobs/uploads/", _push(repo))
        if reply.status not in (201, 202, 401, 403):
            raise PushError(f"registry {repo.host} will not take a push to {repo.name} (HTTP {reply.status}): "
                            "is it read-only (a mirror or a pull-through cache)?")  # fmt: skip
        self._check(reply, repo, "write")
        with suppress(UpstreamError):  # a registry that cannot cancel an upload lets it expire
            self._call("DELETE", repo, self._location(repo, reply), _push(repo))

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
        once: bool = False,
    ) -> Reply:
        base = dict(headers or {}) | ({"Accept": accept} if accept else {})
        try:
            sent = base | self.auth.headers(repo.host, scopes)
            basic = self.auth.basic(repo.host, sent)
            reply = self.http.request(
                method, url, headers=sent, data=data, params=params, auth=basic, cache=cache, once=once
            )
            challenge = parse_challenge(reply.header("www-authenticate")) if reply.status == 401 else None
            if challenge is not None and self.auth.answer(repo.host, scopes, challenge):
                sent = base | self.auth.headers(repo.host, scopes)
                reply = self.http.request(method, url, headers=sent, data=data, params=params, cache=cache, once=once)
        except UpstreamError as exc:
            if isinstance(exc, PushError) or (once and isinstance(exc, Unreachable)):
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


class _Channel:
    """One repository's upload requests for upload_chunked (builder/oci/upload.py)."""

    def __init__(self, client: Distribution, repo: RepoRef) -> None:
        self.client, self.repo = client, repo

    def start_upload(self) -> Reply:
        reply = self.client._call("POST", self.repo, f"{self.repo.base}/blobs/uploads/", _push(self.repo))
        self.client._check(reply, self.repo, "write")
        return reply

    def patch_chunk(self, location: str, chunk: bytes, offset: int) -> Reply | None:
        headers = {"Content-Type": "application/octet-stream", "Content-Range": f"{offset}-{offset + len(chunk) - 1}"}
        return self._once("PATCH", location, headers, chunk)

    def upload_status(self, location: str) -> Reply:
        return self.client._call("GET", self.repo, location, _push(self.repo))

    def finish_upload(self, location: str, digest: str) -> Reply | None:
        separator = "&" if "?" in location else "?"
        headers = {"Content-Type": "application/octet-stream"}
        return self._once("PUT", f"{location}{separator}digest={digest}", headers, b"")

    def location(self, reply: Reply) -> str:
        return self.client._location(self.repo, reply)

    def has_blob(self, digest: str) -> bool:
        return self.client.blob_exists(self.repo, digest, push=True)

    def _once(self, method: str, url: str, headers: dict[str, str], data: bytes) -> Reply | None:
        try:
            return self.client._call(method, self.repo, url, _push(self.repo), headers=headers, data=data, once=True)
        except Unreachable:
            return None


def _pull(repo: RepoRef) -> tuple[str, ...]:
    return (f"repository:{repo.name}:pull",)


def _push(repo: RepoRef) -> tuple[str, ...]:
    return (f"repository:{repo.name}:pull,push",)
