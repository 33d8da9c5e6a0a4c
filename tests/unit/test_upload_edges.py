"""builder/oci/upload.py against a scripted channel (issue 24: mutation testing left these answers unheld):
each request the upload sends, in order, for a registry that asks for larger chunks, holds less than it was
sent, moves the upload, refuses a range (416), refuses or busies the closing PUT, or answers a Range this client
cannot read; what `Sent` counts over several drops; the waits and their 30 s cap; a file longer or shorter than
the blob."""

from __future__ import annotations

import io
import os
from collections.abc import Callable

import pytest

from builder.core.errors import PushError
from builder.net.http import Reply
from builder.oci.client import digest_of
from builder.oci.upload import Sent, UploadPolicy, upload_chunked

BLOB = os.urandom(10_000)
DIGEST = digest_of(BLOB)
POLICY = UploadPolicy(chunk=3000, drops=8, backoff=0.5)


def answer(status: int, **headers: str) -> Reply:
    return Reply(status, {k.replace("_", "-"): v for k, v in headers.items()}, b"", "http://r/x")


class Script:
    """A Channel whose answers are queued per request kind; when a queue is empty it answers as a registry that
    took everything: POST 202 to /u/<n>, PATCH 202 at the same location, GET 204 (no Range: nothing held), PUT
    201. `log` holds each request in order: `POST`, `PATCH <location> <first>-<last byte>`, `GET <location>`,
    `PUT <location> <digest>`, `HEAD <digest>`."""

    def __init__(
        self,
        *,
        starts: list[Reply] | None = None,
        patches: list[Reply | None] | None = None,
        statuses: list[Reply] | None = None,
        finishes: list[Reply | None] | None = None,
        has_blob: bool = False,
    ) -> None:
        self.starts, self.patches = list(starts or []), list(patches or [])
        self.statuses, self.finishes = list(statuses or []), list(finishes or [])
        self.blob_there = has_blob
        self.log: list[str] = []
        self.received = bytearray()  # the bodies of the PATCHes, in order
        self._uploads = 0

    def start_upload(self) -> Reply:
        self._uploads += 1
        self.log.append("POST")
        return self.starts.pop(0) if self.starts else answer(202, location=f"/u/{self._uploads}")

    def patch_chunk(self, location: str, chunk: bytes, offset: int) -> Reply | None:
        self.log.append(f"PATCH {location} {offset}-{offset + len(chunk) - 1}")
        self.received += chunk
        return self.patches.pop(0) if self.patches else answer(202, location=location)

    def upload_status(self, location: str) -> Reply:
        self.log.append(f"GET {location}")
        return self.statuses.pop(0) if self.statuses else answer(204)

    def finish_upload(self, location: str, digest: str) -> Reply | None:
        self.log.append(f"PUT {location} {digest}")
        return self.finishes.pop(0) if self.finishes else answer(201)

    def location(self, reply: Reply) -> str:
        found = reply.header("location")
        if not found:  # as the distribution client: an answer without a Location has nowhere to go on
            raise PushError("registry r opened an upload to team/torch without a Location")
        return found

    def has_blob(self, digest: str) -> bool:
        self.log.append(f"HEAD {digest}")
        return self.blob_there


def push(
    script: Script, data: bytes = BLOB, size: int = len(BLOB), policy: UploadPolicy = POLICY
) -> tuple[Sent, list[float]]:
    waits: list[float] = []
    sent = upload_chunked(script, io.BytesIO(data), DIGEST, size, policy=policy, sleep=waits.append)
    return sent, waits


def refused(call: Callable[[], object]) -> str:
    with pytest.raises(PushError) as raised:
        call()
    return str(raised.value)


def test_a_registry_that_asks_for_larger_chunks_gets_chunks_of_that_size() -> None:
    script = Script(starts=[answer(202, location="/u/1", oci_chunk_min_length="4000")])
    sent, _ = push(script)
    assert script.log == [
        "POST",
        "PATCH /u/1 0-3999",
        "PATCH /u/1 4000-7999",
        "PATCH /u/1 8000-9999",
        f"PUT /u/1 {DIGEST}",
    ]
    assert sent == Sent(bytes=10_000) and script.received == BLOB


@pytest.mark.parametrize("least", ["1000", "3000", "4k", ""])
def test_a_smaller_equal_or_unreadable_minimum_leaves_the_policys_chunk(least: str) -> None:
    script = Script(starts=[answer(202, location="/u/1", oci_chunk_min_length=least)])
    push(script)
    assert [line for line in script.log if line.startswith("PATCH")] == [
        "PATCH /u/1 0-2999",
        "PATCH /u/1 3000-5999",
        "PATCH /u/1 6000-8999",
        "PATCH /u/1 9000-9999",
    ]


def test_a_file_longer_than_the_blob_gives_only_the_blobs_bytes() -> None:
    script = Script()
    sent, _ = push(script, data=BLOB + os.urandom(5000))
    assert script.log[-2:] == ["PATCH /u/1 9000-9999", f"PUT /u/1 {DIGEST}"]
    assert script.received == BLOB and sent.bytes == len(BLOB)


def test_a_file_shorter_than_the_blob_fails_in_one_line_where_it_ended() -> None:
    script = Script()
    assert refused(lambda: push(script, data=BLOB[:5000])) == f"blob {DIGEST}: its content ended at byte 5000 of 10000"
    assert script.log == ["POST", "PATCH /u/1 0-2999", "PATCH /u/1 3000-4999"]


def test_a_chunk_answer_with_a_range_moves_the_upload_to_the_byte_after_it() -> None:
    script = Script(patches=[answer(202, location="/u/1", range="0-1999")])
    sent, _ = push(script)
    assert script.log[1:4] == ["PATCH /u/1 0-2999", "PATCH /u/1 2000-4999", "PATCH /u/1 5000-7999"]
    assert sent == Sent(bytes=11_000)  # the 1000 bytes the registry did not keep, sent again


def test_an_unreadable_range_fails_in_one_line_naming_it() -> None:
    script = Script(patches=[answer(202, location="/u/1", range="bytes=5-2999")])
    assert refused(lambda: push(script)) == (
        "the registry answered an upload with a Range this client cannot read: bytes=5-2999"
    )


def test_a_status_with_a_new_location_moves_the_rest_of_the_upload_there() -> None:
    script = Script(
        patches=[answer(202, location="/u/1"), None], statuses=[answer(204, location="/u/9", range="0-2999")]
    )
    sent, waits = push(script)
    assert script.log == [
        "POST",
        "PATCH /u/1 0-2999",
        "PATCH /u/1 3000-5999",
        "GET /u/1",
        "PATCH /u/9 3000-5999",
        "PATCH /u/9 6000-8999",
        "PATCH /u/9 9000-9999",
        f"PUT /u/9 {DIGEST}",
    ]
    assert (sent, waits) == (Sent(bytes=13_000, resumed=1), [0.5])


def test_a_status_without_location_or_range_goes_on_from_byte_0_at_the_same_location() -> None:
    script = Script(patches=[answer(202, location="/u/1"), None], statuses=[answer(204)])
    sent, _ = push(script)
    assert script.log[1:6] == [
        "PATCH /u/1 0-2999",
        "PATCH /u/1 3000-5999",
        "GET /u/1",
        "PATCH /u/1 0-2999",
        "PATCH /u/1 3000-5999",
    ]
    assert sent == Sent(bytes=16_000, resumed=1) and script.received[6000:] == BLOB


def test_every_resume_is_counted() -> None:
    held = answer(204, location="/u/1", range="0-2999")
    script = Script(patches=[answer(202, location="/u/1"), None, None], statuses=[held, held])
    sent, waits = push(script)
    assert sent == Sent(bytes=16_000, resumed=2, restarted=0) and waits == [0.5, 1.0]


def test_every_restart_is_counted() -> None:
    lost = answer(404)
    script = Script(patches=[None, None], statuses=[lost, lost])
    sent, _ = push(script)
    assert [line for line in script.log if line == "POST"] == ["POST"] * 3
    assert sent == Sent(bytes=16_000, resumed=0, restarted=2)


def test_a_refused_range_starts_a_new_upload_even_where_the_old_one_is_known() -> None:
    script = Script(patches=[answer(416)], statuses=[answer(204, location="/u/1", range="0-2999")])
    sent, waits = push(script)
    assert script.log[:5] == ["POST", "PATCH /u/1 0-2999", "GET /u/1", "POST", "PATCH /u/2 0-2999"]
    assert script.log[-1] == f"PUT /u/2 {DIGEST}"
    assert (sent, waits) == (Sent(bytes=13_000, resumed=0, restarted=1), [0.5])


def test_waits_double_per_drop_and_stop_at_30_seconds() -> None:
    busy = answer(503)
    script = Script(patches=[busy] * 5)
    sent, waits = push(script, policy=UploadPolicy(chunk=3000, drops=5, backoff=10.0))
    assert waits == [10.0, 20.0, 30.0, 30.0, 30.0]
    assert sent == Sent(bytes=25_000, resumed=5)


def test_a_busy_registry_past_the_limit_is_named_with_its_status() -> None:
    script = Script(patches=[answer(503)] * 3)
    message = refused(lambda: push(script, policy=UploadPolicy(chunk=3000, drops=2)))
    assert message == f"blob {DIGEST}: the upload answered HTTP 503 3 times (last while sending bytes 0-2999)"


def test_a_refused_closing_put_fails_in_one_line_and_is_not_sent_again() -> None:
    script = Script(finishes=[answer(400)])
    message = refused(lambda: push(script))
    assert message == f"blob {DIGEST}: the registry answered HTTP 400 while closing the upload"
    assert script.log[-1] == f"PUT /u/1 {DIGEST}"
    assert [line for line in script.log if line.startswith(("PUT", "GET", "HEAD"))] == [f"PUT /u/1 {DIGEST}"]


def test_a_closing_put_answered_busy_past_the_limit_says_so() -> None:
    script = Script(finishes=[answer(503)] * 3, statuses=[answer(204, location="/u/1", range="0-9999")] * 2)
    message = refused(lambda: push(script, policy=UploadPolicy(chunk=3000, drops=2)))
    assert message == f"blob {DIGEST}: the upload answered HTTP 503 3 times (last while closing the upload)"
    assert script.log[5:] == [
        f"PUT /u/1 {DIGEST}",
        "GET /u/1",
        f"PUT /u/1 {DIGEST}",
        "GET /u/1",
        f"PUT /u/1 {DIGEST}",
    ]


def test_a_closing_put_whose_answer_was_lost_is_sent_again_when_the_blob_is_not_there() -> None:
    script = Script(finishes=[None], statuses=[answer(204, location="/u/1", range="0-9999")])
    sent, waits = push(script)
    assert script.log[5:] == [f"PUT /u/1 {DIGEST}", f"HEAD {DIGEST}", "GET /u/1", f"PUT /u/1 {DIGEST}"]
    assert (sent, waits) == (Sent(bytes=10_000, resumed=1), [0.5])
