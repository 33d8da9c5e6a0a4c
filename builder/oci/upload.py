"""Chunked, resumable blob uploads (OCI distribution spec: POST, PATCH with Content-Range, PUT ?digest=).

A large blob goes up in chunks, each one PATCH of its byte range. When the connection drops during a
chunk (or the registry answers 429/5xx), the registry is asked how much of the upload it holds (GET on
the upload URL: its Range header) and the upload goes on from that byte: a drop at 90 % of a 2 GB layer
resends at most the chunk that was in flight, not the 1.8 GB before it.

Some registries drop the upload itself instead: distribution 2.x (the `registry:2` image, Debian's
docker-registry) cancels an upload whose last PATCH was cut in the middle, and its GET then answers 404.
The blob is then sent again from a new upload, from its first byte; `Sent.restarted` counts those, so a
caller (and the bench) can say which kind of registry it met.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Protocol

from builder.core.errors import PushError
from builder.net.http import RETRY_STATUSES, Reply

CHUNK = 16 * 1024 * 1024  # a drop costs at most this much again; each chunk is one request
_RANGE = re.compile(r"^(?:bytes=)?0-(\d+)$")


@dataclass(frozen=True)
class UploadPolicy:
    chunk: int = CHUNK
    drops: int = 8  # dropped chunks (connections lost, 429/5xx) one blob survives
    backoff: float = 0.5  # first wait after a drop; doubles per drop of the same blob, at most 30 s


@dataclass
class Sent:
    """What one upload cost: body bytes sent (resent ones included) and how it came through drops."""

    bytes: int = 0
    resumed: int = 0  # drops after which the upload went on from the registry's Range
    restarted: int = 0  # drops after which the registry had lost the upload: sent again from byte 0


class Channel(Protocol):
    """The four requests of an upload, as the distribution client sends them (auth and errors handled)."""

    def start_upload(self) -> Reply: ...

    def patch_chunk(self, location: str, chunk: bytes, offset: int) -> Reply | None:
        """The chunk's PATCH, sent once: None when the connection dropped before an answer."""

    def upload_status(self, location: str) -> Reply: ...

    def finish_upload(self, location: str, digest: str) -> Reply | None:
        """The closing PUT ?digest=, sent once: None when the connection dropped before an answer."""

    def location(self, reply: Reply) -> str: ...

    def has_blob(self, digest: str) -> bool: ...


def upload_chunked(
    channel: Channel,
    data: IO[bytes],
    digest: str,
    size: int,
    *,
    location: str | None = None,
    policy: UploadPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Sent:
    """Send `size` bytes of `data` (seekable, positioned anywhere) as blob `digest`, chunk by chunk."""
    upload = _Upload(channel, data, digest, size, policy or UploadPolicy(), sleep)
    upload.begin(location)
    upload.run()
    return upload.sent


class _Upload:
    def __init__(
        self,
        channel: Channel,
        data: IO[bytes],
        digest: str,
        size: int,
        policy: UploadPolicy,
        sleep: Callable[[float], None],
    ) -> None:
        self.channel, self.data, self.digest, self.size = channel, data, digest, size
        self.policy, self.sleep = policy, sleep
        self.sent = Sent()
        self.location = ""
        self.offset = 0
        self.chunk = policy.chunk
        self.drops = 0

    def begin(self, location: str | None) -> None:
        if location is not None:  # a mount the registry answered with an upload instead
            self.location, self.offset = location, 0
            return
        reply = self.channel.start_upload()
        self.location, self.offset = self.channel.location(reply), 0
        least = reply.header("oci-chunk-min-length")  # a registry that refuses smaller chunks says so
        if least and least.isdigit():
            self.chunk = max(self.chunk, int(least))

    def run(self) -> None:
        while True:
            if self.offset < self.size:
                self._send_chunk()
                continue
            reply = self.channel.finish_upload(self.location, self.digest)
            if reply is not None and reply.ok:
                return
            if reply is None and self.channel.has_blob(self.digest):  # the answer was lost, not the PUT
                return
            self._dropped(reply, "closing the upload")

    def _send_chunk(self) -> None:
        self.data.seek(self.offset)
        chunk = self.data.read(min(self.chunk, self.size - self.offset))
        if not chunk:
            raise PushError(f"blob {self.digest}: its content ended at byte {self.offset} of {self.size}")
        reply = self.channel.patch_chunk(self.location, chunk, self.offset)
        self.sent.bytes += len(chunk)
        if reply is not None and reply.status == 202:
            self.location = self.channel.location(reply)
            self.offset = _held(reply) if reply.header("range") else self.offset + len(chunk)
            return
        self._dropped(reply, f"sending bytes {self.offset}-{self.offset + len(chunk) - 1}")

    def _dropped(self, reply: Reply | None, doing: str) -> None:
        """After a lost connection or a busy registry: wait, then go on from what the registry holds."""
        if reply is not None and reply.status not in RETRY_STATUSES and reply.status != 416:
            raise PushError(f"blob {self.digest}: the registry answered HTTP {reply.status} while {doing}")
        self.drops += 1
        if self.drops > self.policy.drops:
            what = "dropped" if reply is None else f"answered HTTP {reply.status}"
            raise PushError(f"blob {self.digest}: the upload {what} {self.drops} times (last while {doing})")
        self.sleep(min(self.policy.backoff * 2 ** (self.drops - 1), 30.0))
        status = self.channel.upload_status(self.location)
        if status.ok and (reply is None or reply.status != 416):
            self.location = self.channel.location(status) if status.header("location") else self.location
            self.offset = _held(status) if status.header("range") else 0
            self.sent.resumed += 1
            return
        self.begin(None)  # the registry no longer knows this upload (or disagrees on its size): a new one
        self.sent.restarted += 1


def _held(reply: Reply) -> int:
    """The next byte to send, from a Range header `0-<last byte held>`. `0-0` is read as nothing held: a
    registry says so for an empty upload (distribution writes 0-0 for 0 bytes), and a wrong guess costs
    one refused chunk (416), after which the upload starts again."""
    found = _RANGE.match((reply.header("range") or "").strip())
    if found is None:
        raise PushError(
            f"the registry answered an upload with a Range this client cannot read: {reply.header('range')}"
        )
    last = int(found[1])
    return 0 if last == 0 else last + 1
