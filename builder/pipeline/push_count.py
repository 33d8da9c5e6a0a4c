"""The bytes an engine's push (`docker push`) sent to the registry, for the publish report's pushed_bytes.

The push stream says which layers the engine uploaded and which the registry already had (builder/engine/
push_stream.py) but gives a size only for some; the sizes are read from the manifest the push wrote. Counted: each
layer (and the config, where the stream names it) said to be sent, and the manifest itself. Not counted: the image
config where the stream does not name it (the containerd store never does; it is one small JSON blob). Not
recorded (None): an engine that does not say what it sent, a stream that does not settle every layer of the
manifest, a manifest that is not the one just pushed, or one that cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable

from builder.core.errors import TorchyardError
from builder.engine import Engine, RegistryAuth
from builder.engine.push_stream import PushedLayers, PushSaid
from builder.oci.client import Manifest
from builder.pipeline.registry import Registry


def engine_push(
    engine: Engine, registry: Registry, ref: str, auth: RegistryAuth | None, on_line: Callable[[str], None]
) -> tuple[str, int | None]:
    """Push `ref` with the engine: its digest, and the bytes sent (None: not recorded)."""
    push_said: PushSaid | None = getattr(engine, "push_said", None)  # not in Engine: a test's fake has none
    if push_said is None:
        return engine.push(ref, auth, on_line), None
    digest, said = push_said(ref, auth, on_line)
    try:
        manifest = registry.read(ref)
    except TorchyardError:  # the image is pushed; only its count is lost
        return digest, None
    return digest, sent_bytes(said, manifest, digest)


def sent_bytes(said: PushedLayers, manifest: Manifest | None, digest: str) -> int | None:
    """The layers `said` sent, by their sizes in the pushed manifest, plus the manifest's own bytes."""
    if manifest is None or manifest.is_index or manifest.digest != digest:
        return None  # an index's children are other reads; another push may have moved the tag since
    total = len(manifest.raw)
    config = manifest.data.get("config") or {}
    if _short(config) in said.sent:
        total += int(config.get("size") or 0)
    for layer in manifest.data.get("layers") or []:
        short = _short(layer)
        if short in said.sent:
            total += int(layer.get("size") or 0)
        elif short not in said.kept:
            return None  # the stream did not say whether this layer was sent
    return total


def _short(descriptor: dict[str, object]) -> str:
    """The id the push stream gives a blob: the first 12 hex digits of its digest."""
    return str(descriptor.get("digest") or "").removeprefix("sha256:")[:12]
