"""What the build pipeline asks a registry: which labels does the image under a tag carry, and does the
tag already hold this content (same content hash)? Used to skip builds and pushes that are up to date.

A thin layer over the OCI distribution client (builder.oci.client), which talks plain HTTP to loopback
registries (as the engine does: 127.0.0.0/8 is trusted as insecure) and HTTPS elsewhere, maps docker.io
to its API host, answers basic and bearer-token challenges with the credentials given to torchyard or
else the user's own `docker login` for that registry (read, never written), retries on 429/5xx and
reads indexes for any platform.
"""

from __future__ import annotations

from builder.core.errors import PushError
from builder.engine import RegistryAuth, split_ref
from builder.net.http import Http, Policy
from builder.oci.auth import docker_login
from builder.oci.client import Distribution, Manifest
from builder.oci.index import IndexEntry, write_index
from builder.oci.refs import DOCKER_HUB, RepoRef, parse_repo
from builder.pipeline.plan import CONTENT_LABEL

__all__ = ["DOCKER_HUB", "TIMEOUT", "Registry", "RepoRef", "docker_login", "parse_repo"]

TIMEOUT = 30
DEFAULT_PLATFORM = "linux/amd64"
INDEX_CONTENT = "io.torchyard.content-hash"  # the annotation of a multi-platform index: its content identity


class Registry:
    def __init__(self, auth: RegistryAuth | None = None, *, client: Distribution | None = None) -> None:
        self.client = client or Distribution(Http(Policy(timeout=TIMEOUT)), auth)

    def labels(
        self, ref: str, platform: str = DEFAULT_PLATFORM, *, top: Manifest | None = None
    ) -> dict[str, str] | None:
        """Labels of the image for `platform` under repo:tag, or None when the tag does not exist. `top`: the
        tag's manifest when it was read already (read)."""
        repo, tag = split_ref(ref)
        found = self.client.image(parse_repo(repo), tag, platform, top=top)
        if found is None:
            return None
        manifest, config = found
        if not manifest.data.get("config"):
            return None
        return dict((config.get("config") or {}).get("Labels") or {})

    def holds(self, ref: str, content_hash: str, platform: str = DEFAULT_PLATFORM) -> bool:
        """Whether the tag already holds an image with exactly this content hash (for `platform`)."""
        labels = self.labels(ref, platform)
        return labels is not None and labels.get(CONTENT_LABEL) == content_hash

    def holding(self, ref: str, content_hash: str, platform: str = DEFAULT_PLATFORM) -> str | None:
        """The tag's digest when it holds an image with exactly this content hash (for `platform`), else None:
        one read of the tag (and of the image's config)."""
        top = self.read(ref)
        if top is None:
            return None
        labels = self.labels(ref, platform, top=top)
        return top.digest if labels is not None and labels.get(CONTENT_LABEL) == content_hash else None

    def read(self, ref: str) -> Manifest | None:
        """The manifest or index under repo:tag as the registry holds it (one request); None when the tag does not
        exist. Its digest, layer sizes (layer_sizes) and bytes (put) then need no second read."""
        repo, tag = split_ref(ref)
        return self.client.manifest(parse_repo(repo), tag)

    def digest(self, ref: str) -> str | None:
        """The digest of the manifest or index under repo:tag; None when the tag does not exist."""
        found = self.read(ref)
        return None if found is None else found.digest

    def put(self, ref: str, manifest: Manifest) -> str:
        """Store a manifest read from this registry (read), byte for byte, under repo:tag; returns its digest."""
        repo, tag = split_ref(ref)
        return self.client.put_manifest(parse_repo(repo), tag, manifest.raw, manifest.media_type)

    def check_push(self, repo: str) -> None:
        """PushError (exit 5) when the registry will not take a push to repo (read-only, no permission, no
        credentials): asked before anything is built."""
        self.client.check_push(parse_repo(repo))

    def retag(self, source: str, target: str) -> tuple[str, bool]:
        """Put the manifest (or index) under repo:source, byte for byte, under repo:target in the same repository:
        the target then has the source's digest, so its signatures and attestations too. Returns the digest and
        whether the target changed (False: it already had that digest). Nothing is pulled or pushed through the
        engine, which would store another manifest than the signed one (issue 44)."""
        repo, tag = split_ref(source)
        target_repo, target_tag = split_ref(target)
        ref = parse_repo(repo)
        if parse_repo(target_repo) != ref:
            raise PushError(f"cannot move {target} to {source}: another repository")
        found = self.client.manifest(ref, tag)
        if found is None:
            raise PushError(f"{source} is not in the registry: nothing to move {target_tag} to")
        current = self.client.manifest(ref, target_tag)
        if current is not None and current.digest == found.digest:
            return found.digest, False
        return self.client.put_manifest(ref, target_tag, found.raw, found.media_type), True

    # -- multi-platform images (builder/pipeline/multiplatform.py) ---------------------------------------------------

    def index_content(self, ref: str) -> str | None:
        """The content identity torchyard wrote on the index under repo:tag; None when the tag is missing, is a
        single image, or is an index torchyard did not write."""
        repo, tag = split_ref(ref)
        found = self.client.manifest(parse_repo(repo), tag)
        if found is None or not found.is_index:
            return None
        value = (found.data.get("annotations") or {}).get(INDEX_CONTENT)
        return str(value) if value else None

    def platform_digest(self, ref: str, platform: str) -> str | None:
        """The digest of the image manifest under repo:tag when it is one image of `platform`; None otherwise."""
        repo, tag = split_ref(ref)
        found = self.client.platforms(parse_repo(repo), tag)
        if found is None or list(found) != [platform]:
            return None
        return found[platform]

    def put_index(self, ref: str, members: dict[str, str], content_hash: str) -> str:
        """An OCI image index of {platform: image manifest digest} (each checked in the registry first) under
        repo:tag, annotated with its content identity; returns its digest."""
        repo, tag = split_ref(ref)
        entries = [IndexEntry(digest, platform) for platform, digest in members.items()]
        written = write_index(self.client, parse_repo(repo), tag, entries, annotations={INDEX_CONTENT: content_hash})
        return written.digest


def layer_sizes(manifest: Manifest | None) -> dict[str, int] | None:
    """{layer digest: compressed size} of a single image's manifest; None for no manifest or an index."""
    if manifest is None or manifest.is_index:
        return None
    return {str(d["digest"]): int(d.get("size") or 0) for d in manifest.data.get("layers") or []}
