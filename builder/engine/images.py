"""Building and moving images: BuildKit builds through the docker CLI (argv lists via
builder.core.process.run_command), inspect, tag, push, pull, history, save and file reads through the SDK."""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from builder.core.errors import BuildError, EngineError, Interrupted, PushError
from builder.core.names import check_reference
from builder.core.process import Completed, check_cancelled, run_command
from builder.engine.build_failure import explain
from builder.engine.buildkit_log import BuildkitLog
from builder.engine.probe import Connection, cache_problem, short
from builder.engine.push_stream import LayerTally, PushedLayers
from builder.engine.types import BuildRequest, ImageInfo, RegistryAuth

ORPHANED = "no active sessions"  # BuildKit's words for a step whose client (and its secrets) went away
ORPHAN_WAIT = 5.0  # seconds for BuildKit to cancel such a step before the one retry


def build_command(request: BuildRequest, client: str = "docker", *, buildx: bool = False) -> list[str]:
    """The docker CLI argv of a build (the CLI is the BuildKit front end): buildx where the client has the
    plugin, else the classic `docker build` with DOCKER_BUILDKIT=1. buildx's own provenance attestation is off: it
    would wrap each image in an index (another digest for the same image, an unknown/unknown manifest beside it);
    torchyard attaches its SLSA provenance after the smoke suite instead (docs/trust.md)."""
    argv = [client, "buildx", "build", "--load", "--provenance=false"] if buildx else [client, "build"]
    argv += ["--progress=plain", "--target", request.target, "-f", str(request.dockerfile)]
    if request.platform:
        argv += ["--platform", request.platform]
    for key, value in request.build_args:
        argv += ["--build-arg", f"{key}={value}"]
    for ident, source in request.secrets:
        argv += ["--secret", f"id={ident},src={source}"]
    for key, value in sorted(request.labels):
        argv += ["--label", f"{key}={value}"]
    for ref in request.tags:
        argv += ["-t", ref]
    return [*argv, *cache_flags(request.cache), str(request.context)]


def cache_flags(ref: str | None) -> list[str]:
    """buildx's registry cache options for `ref`: read every step's cache from it, write every stage's back
    (mode=max: the builder stages too, which the image does not carry). buildx splits these values at ',' into
    key=value pairs; the reference grammar admits no ',', '=' or space, so a ref cannot add an option of its own."""
    if ref is None:
        return []
    check_reference(ref, "--cache")
    return ["--cache-from", f"type=registry,ref={ref}", "--cache-to", f"type=registry,ref={ref},mode=max"]


class Images(Connection):
    """The image half of the real engine."""

    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str:
        info = self.info()
        if request.cache and (problem := cache_problem(info)):  # one line, before the CLI fails on the option
            raise EngineError(problem)
        with tempfile.TemporaryDirectory(prefix="torchyard-iid-") as tmp:
            iidfile, metadata = Path(tmp) / "iid", Path(tmp) / "metadata.json"
            full = build_command(request, info.client, buildx=info.buildx)
            full.insert(len(full) - 1, f"--iidfile={iidfile}")  # the image id, read back below
            if info.buildx:  # the manifest's digest too: the image's id in containerd's store
                full.insert(len(full) - 1, f"--metadata-file={metadata}")
            steps, done = self._run_build(full, on_line)
            if done.returncode != 0 and ORPHANED in "\n".join(done.tail):
                # BuildKit joined a step still running for a client that is gone (a build interrupted moments
                # ago): that step's secrets went with its session. Once it is cancelled, the same build runs.
                on_line(f"torchyard: {ORPHANED}: a step was still running for an interrupted build; building again")
                time.sleep(ORPHAN_WAIT)
                steps, done = self._run_build(full, on_line)
            if done.returncode != 0:
                gone = self.gone(f"the build of {request.target}")
                if gone is not None:  # not the build's fault ("server did not provide an image ID")
                    raise gone
                raise BuildError(explain(steps, done.returncode))
            return built_id(iidfile, metadata, containerd=info.containerd_store)

    @staticmethod
    def _run_build(argv: list[str], on_line: Callable[[str], None]) -> tuple[BuildkitLog, Completed]:
        steps = BuildkitLog()  # the failing step and its own output, however far back its header was

        def read(line: str) -> None:
            steps.feed(line)
            on_line(line)

        return steps, run_command(argv, env=dict(os.environ, DOCKER_BUILDKIT="1"), on_line=read)

    # -- images -------------------------------------------------------------------------------------
    def inspect(self, ref: str) -> ImageInfo | None:
        import docker

        try:
            image = self._sdk().images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise self.gone(f"the inspect of {ref}") or EngineError(f"inspect {ref}: {short(exc)}") from None
        return replace(image_info(image.attrs), id=image.id, tags=tuple(image.tags))

    def labelled(self, label: str) -> list[ImageInfo]:
        """Every local image that carries `label` (torchyard's own: io.torchyard.version), each inspected."""
        import docker

        try:
            listed = self._sdk().api.images(filters={"label": label})
        except (docker.errors.DockerException, OSError) as exc:
            raise self.gone("the image list") or EngineError(f"list images: {short(exc)}") from None
        found = (self.inspect(str(item.get("Id", ""))) for item in listed)
        return [info for info in found if info is not None]

    def tag(self, image_id: str, ref: str) -> None:
        import docker

        repo, tag = split_ref(ref)
        try:  # an image gone between its build and its tag (removed by another client) is one line, not a traceback
            tagged = self._sdk().images.get(image_id).tag(repo, tag)
        except (docker.errors.DockerException, OSError) as exc:
            raise self.gone(f"the tag of {ref}") or EngineError(f"tag {image_id[:19]} as {ref}: {short(exc)}") from None
        if not tagged:
            raise EngineError(f"could not tag {image_id[:19]} as {ref}")

    def untag(self, ref: str) -> None:
        """Remove the name `ref`, or the image `ref` names by id when it has no name left (docker rmi, not forced:
        EngineError when a container still uses it)."""
        import docker

        try:
            self._sdk().images.remove(ref, noprune=True)
        except docker.errors.ImageNotFound:
            return
        except (docker.errors.DockerException, OSError) as exc:  # a conflict: a container uses it
            raise self.gone(f"the removal of {ref}") or EngineError(f"remove {ref}: {short(exc)}") from None

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        return self.push_said(ref, auth, on_line)[0]

    def push_said(
        self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]
    ) -> tuple[str, PushedLayers]:
        """The push, its digest, and what its stream said of each layer (sent, or already there)."""
        repo, tag = split_ref(ref)
        digest, said = "", LayerTally()
        try:
            stream = self._sdk().api.push(
                repo, tag=tag, stream=True, decode=True, auth_config=auth.sdk() if auth else None
            )
            for event in stream:
                check_cancelled(f"{ref} was pushed")
                if "error" in event:
                    raise PushError(f"push {ref}: {push_refusal(str(event['error']))}")
                digest = (event.get("aux") or {}).get("Digest", digest) or _said_digest(event)
                said.feed(event)
                if event.get("status") and event.get("id") is None:
                    on_line(str(event["status"]))
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while pushing {ref}") from None
        except (PushError, Interrupted):
            raise
        except Exception as exc:
            gone = self.gone(f"the push of {ref}")  # not the registry's fault
            raise gone or PushError(f"push {ref}: {short(exc)}") from None
        if not digest:
            raise PushError(f"push {ref}: the registry returned no digest")
        return digest, said.layers()

    def pull(self, ref: str, auth: RegistryAuth | None) -> ImageInfo:
        repo, _, digest = ref.partition("@")
        try:
            self._sdk().api.pull(repo, tag=digest or None, auth_config=auth.sdk() if auth else None)
        except Exception as exc:
            raise PushError(f"pull {ref}: {short(exc)}") from None
        found = self.inspect(ref)
        if found is None:
            raise PushError(f"pull {ref}: the image is not in the engine after the pull")
        return found

    def history(self, ref: str) -> list[str]:
        return [str(h.get("CreatedBy", "")) for h in self._sdk().api.history(ref)]

    def save(self, ref: str, path: Path) -> None:
        with path.open("wb") as out:
            for chunk in self._sdk().images.get(ref).save(named=True):
                out.write(chunk)

    def read_file(self, image: str, path: str, limit: int = 1 << 20) -> bytes | None:
        """A file of the image, read from a created (never started) container; None when there is none."""
        import io
        import tarfile

        import docker

        try:
            container = self._sdk().containers.create(image, command=["true"], network_mode="none")
        except docker.errors.DockerException as exc:
            raise EngineError(f"could not open {image}: {short(exc)}") from None
        try:
            stream, _ = container.get_archive(path)
            data = b"".join(stream)[: limit + 4096]
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = tar.next()
                if member is None or not member.isfile() or member.size > limit:
                    return None
                handle = tar.extractfile(member)
                return handle.read() if handle else None
        except (docker.errors.NotFound, tarfile.TarError):
            return None
        finally:
            with suppress(docker.errors.DockerException):
                container.remove(force=True)


def built_id(iidfile: Path, metadata: Path, *, containerd: bool) -> str:
    """The engine's id of the image a build made. The iidfile holds the config's digest, which is the id in the
    graph driver's store; in containerd's store the id is the manifest's digest (buildx's metadata file has it)."""
    if containerd and metadata.is_file():
        digest = json.loads(metadata.read_text() or "{}").get("containerimage.digest")
        if isinstance(digest, str) and digest.startswith("sha256:"):
            return digest
    return iidfile.read_text().strip()


def image_info(attrs: dict[str, Any]) -> ImageInfo:
    """The engine's image JSON (GET /images/NAME/json, as the SDK and the socket read it)."""
    config = attrs.get("Config") or {}
    return ImageInfo(
        id=str(attrs.get("Id", "")),
        labels=dict(config.get("Labels") or {}),
        tags=tuple(attrs.get("RepoTags") or ()),
        digests=tuple(attrs.get("RepoDigests") or ()),
        size=int(attrs.get("Size", 0)),
        env=tuple(config.get("Env") or ()),
        platform=f"{attrs.get('Os', 'linux')}/{attrs.get('Architecture', 'amd64')}",
        created=str(attrs.get("Created") or ""),
    )


def split_ref(ref: str) -> tuple[str, str]:
    """'host:5000/team/img:tag' -> ('host:5000/team/img', 'tag'); a digest ref 'img@sha256:..' ->
    ('img', 'sha256:..'), which the registry API and the SDK's pull accept where a tag goes."""
    if "@" in ref:
        name, _, digest = ref.partition("@")
        return name, digest
    name, _, tag = ref.rpartition(":")
    if not name or "/" in tag:
        return ref, "latest"
    return name, tag


_UNPARSED = re.compile(r"error parsing HTTP (\d{3}) response body")
# the containerd store's words for the same: "unexpected status from POST request to URL: 405 Method Not Allowed"
_UNEXPECTED = re.compile(r"unexpected status from [A-Z]+ request to \S+: (\d{3})")
_DIGEST_SAID = re.compile(r": digest: (sha256:[0-9a-f]{64}) size: \d+")


def _said_digest(event: dict[str, Any]) -> str:
    """The digest a push names in its status line ("TAG: digest: sha256:... size: N"): the containerd store's push
    sends no aux event with it."""
    found = _DIGEST_SAID.search(str(event.get("status") or ""))
    return found[1] if found else ""


_STATUS = {
    401: "unauthorized: give --registry-user and the password (or docker login)",
    403: "denied: these credentials may not push to this repository",
    404: "not found: no such repository, or the registry serves no pushes at this path",
    405: "method not allowed: the registry is read-only (or takes no pushes here)",
    413: "too large: the registry (or a proxy before it) refuses a layer this size",
}


def push_refusal(text: str) -> str:
    """The daemon's words for a registry's refusal, as one line a user can act on: a registry that answers with a
    body that is not its JSON error (a read-only registry's "Method not allowed") reaches us as "error parsing
    HTTP 405 response body: invalid character ...", which says nothing of the refusal itself."""
    text = " ".join(text.split())
    found = _UNPARSED.search(text) or _UNEXPECTED.search(text)
    if found is None:
        return text[:400]
    status = int(found[1])
    return f"the registry refused it: HTTP {status}, {_STATUS.get(status, 'refused')}"
