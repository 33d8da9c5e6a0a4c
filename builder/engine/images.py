"""Building and moving images: BuildKit builds through the docker CLI (argv lists via
builder.core.process.run_command), inspect, tag, push, pull, history, save and file reads through the SDK."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from builder.core.errors import BuildError, EngineError, Interrupted, PushError
from builder.core.process import check_cancelled, run_command
from builder.engine.probe import Connection, short
from builder.engine.types import BuildRequest, ImageInfo, RegistryAuth


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
    return [*argv, str(request.context)]


class Images(Connection):
    """The image half of the real engine."""

    def build(self, request: BuildRequest, on_line: Callable[[str], None]) -> str:
        info = self.info()
        with tempfile.TemporaryDirectory(prefix="torchyard-iid-") as tmp:
            iidfile = Path(tmp) / "iid"
            full = build_command(request, info.client, buildx=info.buildx)
            full.insert(len(full) - 1, f"--iidfile={iidfile}")  # the image id, read back below
            env = dict(os.environ, DOCKER_BUILDKIT="1")
            done = run_command(full, env=env, on_line=on_line)
            if done.returncode != 0:
                gone = self.gone(f"the build of {request.target}")
                if gone is not None:  # not the build's fault ("server did not provide an image ID")
                    raise gone
                raise BuildError(f"docker build failed (exit {done.returncode}): {last_error(done.tail)}")
            return iidfile.read_text().strip()

    # -- images -------------------------------------------------------------------------------------
    def inspect(self, ref: str) -> ImageInfo | None:
        import docker

        try:
            image = self._sdk().images.get(ref)
        except docker.errors.ImageNotFound:
            return None
        except (docker.errors.DockerException, OSError) as exc:  # requests' errors are OSErrors
            raise self.gone(f"the inspect of {ref}") or EngineError(f"inspect {ref}: {short(exc)}") from None
        attrs = image.attrs
        config = attrs.get("Config") or {}
        return ImageInfo(
            id=image.id,
            labels=dict(config.get("Labels") or {}),
            tags=tuple(image.tags),
            digests=tuple(attrs.get("RepoDigests") or ()),
            size=int(attrs.get("Size", 0)),
            env=tuple(config.get("Env") or ()),
            platform=f"{attrs.get('Os', 'linux')}/{attrs.get('Architecture', 'amd64')}",
        )

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        if not self._sdk().images.get(image_id).tag(repo, tag):
            raise EngineError(f"could not tag {image_id[:19]} as {ref}")

    def untag(self, ref: str) -> None:
        import docker

        with suppress(docker.errors.ImageNotFound):
            self._sdk().images.remove(ref, noprune=True)

    def push(self, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]) -> str:
        repo, tag = split_ref(ref)
        digest = ""
        try:
            stream = self._sdk().api.push(
                repo, tag=tag, stream=True, decode=True, auth_config=auth.sdk() if auth else None
            )
            for event in stream:
                check_cancelled(f"{ref} was pushed")
                if "error" in event:
                    raise PushError(f"push {ref}: {push_refusal(str(event['error']))}")
                digest = (event.get("aux") or {}).get("Digest", digest)
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
        return digest

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
    found = _UNPARSED.search(text)
    if found is None:
        return text[:400]
    status = int(found[1])
    return f"the registry refused it: HTTP {status}, {_STATUS.get(status, 'refused')}"


def last_error(tail: tuple[str, ...]) -> str:
    for line in reversed(tail):
        if "ERROR" in line or "error" in line:
            return line.strip()[:400]
    return tail[-1].strip()[:400] if tail else "no output"
