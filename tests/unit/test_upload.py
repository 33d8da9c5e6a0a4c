"""Chunked, resumable blob uploads (builder/oci/upload.py) against the in-memory registry: chunks of the
policy's size, a cut chunk resumed from the registry's Range, a registry that cancels a cut upload given the
blob again, limits and refusals as one line each, and the single-attempt requests they rest on."""

from __future__ import annotations

import io
import os

import pytest
import requests
from http_kit import Answer, Net, Sent
from registry_kit import MemoryRegistry

from builder.core.errors import PushError
from builder.net.http import Unreachable
from builder.oci.client import Distribution, digest_of
from builder.oci.refs import RepoRef
from builder.oci.upload import UploadPolicy

HOST = "127.0.0.1:5999"
REPO = RepoRef(HOST, "team/torch")
CHUNK = 3000
BLOB = os.urandom(10_000)


def _client(net: Net, **policy: int) -> Distribution:
    return Distribution(net.http(), docker_login=False, uploads=UploadPolicy(chunk=CHUNK, **policy))


def _push(registry: MemoryRegistry, net: Net, **policy: int) -> tuple[Distribution, int, int, int]:
    client = _client(net, **policy)
    sent = client.upload_file(REPO, io.BytesIO(BLOB), digest_of(BLOB), len(BLOB))
    assert registry.blobs[REPO.name, digest_of(BLOB)] == BLOB
    return client, sent.bytes, sent.resumed, sent.restarted


def _patches(net: Net) -> list[str]:
    return [s.headers["Content-Range"] for s in net.sent if s.method == "PATCH"]


def test_a_blob_larger_than_a_chunk_goes_up_chunk_by_chunk() -> None:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    _, sent, resumed, restarted = _push(registry, net)
    assert _patches(net) == ["0-2999", "3000-5999", "6000-8999", "9000-9999"]
    closing = [s for s in net.sent if s.method == "PUT"]
    assert len(closing) == 1 and closing[0].body == b"" and closing[0].query["digest"] == [digest_of(BLOB)]
    assert (sent, resumed, restarted) == (len(BLOB), 0, 0)


def test_a_blob_of_one_chunk_goes_up_in_one_request() -> None:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    small = BLOB[:CHUNK]
    _client(net).upload_file(REPO, io.BytesIO(small), digest_of(small), len(small))
    assert _patches(net) == []
    assert registry.blobs[REPO.name, digest_of(small)] == small


def test_a_cut_chunk_goes_on_from_the_byte_the_registry_holds() -> None:
    net = Net()
    registry = MemoryRegistry(HOST, cuts=[7500]).attach(net)  # 90 % of the way, in the third chunk
    _, sent, resumed, restarted = _push(registry, net)
    assert (resumed, restarted) == (1, 0)
    assert registry.received == len(BLOB)  # no byte reached the registry twice
    assert sent < len(BLOB) + CHUNK
    assert _patches(net) == ["0-2999", "3000-5999", "6000-8999", "7500-9999"]
    asked = [s for s in net.sent if s.method == "GET" and "/blobs/uploads/" in s.path]
    assert len(asked) == 1
    assert net.waits == [0.5]  # one wait before asking


def test_a_registry_that_cancels_a_cut_upload_gets_the_blob_again_from_a_new_upload() -> None:
    net = Net()
    registry = MemoryRegistry(HOST, cuts=[7500], cancel_cut=True).attach(net)
    _, sent, resumed, restarted = _push(registry, net)
    assert (resumed, restarted) == (0, 1)
    assert sent == 9000 + len(BLOB)  # what went before the cut, then the whole blob again
    assert len([s for s in net.sent if s.method == "POST"]) == 2


def test_every_drop_of_one_blob_counts_and_past_the_limit_the_push_fails_in_one_line() -> None:
    net = Net()
    registry = MemoryRegistry(HOST, cuts=[100, 200, 300]).attach(net)
    with pytest.raises(PushError) as caught:
        _push(registry, net, drops=2)
    assert str(caught.value) == (
        f"blob {digest_of(BLOB)}: the upload dropped 3 times (last while sending bytes 200-3199)"
    )
    assert net.waits == [0.5, 1.0]  # doubling, and no wait after the last drop


def test_a_refused_chunk_is_not_sent_again() -> None:
    net = Net()

    def refuse(sent: Sent) -> Answer | None:
        return Answer(400, b"") if sent.method == "PATCH" else None

    net.on(refuse)
    MemoryRegistry(HOST).attach(net)
    with pytest.raises(PushError, match=r"answered HTTP 400 while sending bytes 0-2999$"):
        _client(net).upload_file(REPO, io.BytesIO(BLOB), digest_of(BLOB), len(BLOB))
    assert len(_patches(net)) == 1


def test_a_busy_registry_is_asked_for_its_range_and_the_chunk_sent_again() -> None:
    net = Net()
    busy = [Answer(503, b"")]

    def once_busy(sent: Sent) -> Answer | None:
        return busy.pop() if sent.method == "PATCH" and busy else None

    net.on(once_busy)
    registry = MemoryRegistry(HOST).attach(net)
    _, sent, resumed, _ = _push(registry, net)
    assert resumed == 1 and sent == len(BLOB) + CHUNK
    assert _patches(net)[:2] == ["0-2999", "0-2999"]


def test_a_lost_answer_to_the_closing_put_is_checked_against_the_registry() -> None:
    net = Net()
    registry = MemoryRegistry(HOST).attach(net)
    lost = [True]

    def lose_answer(sent: Sent) -> Exception | None:
        if sent.method == "PUT" and lost:
            lost.pop()
            registry.handle(sent)  # the registry did store it; only its answer is lost
            return requests.ConnectionError("reset")
        return None

    net.handlers.insert(0, lose_answer)
    _push(registry, net)
    assert [s.method for s in net.sent][-2:] == ["PUT", "HEAD"]


def test_a_single_attempt_leaves_the_host_usable_for_the_next_request() -> None:
    net = Net()
    calls: list[str] = []

    def flaky(sent: Sent) -> Answer | Exception:
        calls.append(sent.method)
        return requests.ConnectionError("reset") if len(calls) <= 3 else Answer(200, b"ok")

    net.on(flaky)
    http = net.http()
    for _ in range(3):
        with pytest.raises(Unreachable):
            http.request("PATCH", f"http://{HOST}/x", data=b"chunk", once=True)
    assert http.get(f"http://{HOST}/x").body == b"ok"
    assert calls == ["PATCH", "PATCH", "PATCH", "GET"]  # one attempt each, and the host is not given up on
