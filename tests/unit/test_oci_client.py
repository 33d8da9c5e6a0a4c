"""builder.oci.client against a registry that misbehaves one way at a time (issue 24: mutation testing left
these answers unheld): each is one line naming the registry and what it did; uploads go where the registry said,
with the digest; a copy between registries moves the bytes it was asked for, checked, and counts them."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
import requests
from http_kit import Answer, Net, Sent, json_answer
from registry_kit import MemoryRegistry, ScopedRegistry

from builder.core.errors import PushError
from builder.net.cache import DiskCache
from builder.net.http import Policy
from builder.oci import client as client_module
from builder.oci.client import OCI_INDEX, OCI_MANIFEST, Distribution, digest_of
from builder.oci.refs import parse_repo
from builder.oci.upload import UploadPolicy

REPO = parse_repo("127.0.0.1:5000/team/torch")
OTHER = parse_repo("127.0.0.1:5001/mirror/torch")
BASE = REPO.base
CONFIG = json.dumps({"os": "linux", "architecture": "arm64", "variant": "v8"}).encode()
MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": digest_of(CONFIG), "size": len(CONFIG)}}).encode()


@pytest.fixture(autouse=True)
def no_docker_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))


def client(net: Net, cache: DiskCache | None = None) -> Distribution:
    return Distribution(net.http(Policy(retries=0, connect_retries=0, workers=1), cache=cache))


def refused(call: object) -> str:
    assert callable(call)
    with pytest.raises(PushError) as raised:
        call()
    assert raised.value.exit_code == 5
    return str(raised.value)


def test_a_manifest_that_is_not_json_or_not_its_digest_is_refused() -> None:
    net = Net().route("GET", f"{BASE}/manifests/latest", Answer(200, b"<html>"))
    net.route("GET", f"{BASE}/manifests/sha256:{'a' * 64}", Answer(200, MANIFEST))
    dist = client(net)
    assert refused(lambda: dist.manifest(REPO, "latest")) == (
        "registry 127.0.0.1:5000 answered a manifest of team/torch that is not JSON"
    )
    assert refused(lambda: dist.manifest(REPO, f"sha256:{'a' * 64}")) == (
        f"registry 127.0.0.1:5000 answered team/torch@sha256:{'a' * 64} with content of {digest_of(MANIFEST)}"
    )


def test_a_manifest_s_type_comes_from_its_body_or_else_its_content_type() -> None:
    net = Net().route("GET", f"{BASE}/manifests/a", Answer(200, MANIFEST, {"Content-Type": f"{OCI_MANIFEST}; x=1"}))
    typed = json.dumps({"mediaType": OCI_INDEX, "manifests": []}).encode()
    net.route("GET", f"{BASE}/manifests/b", Answer(200, typed, {"Content-Type": OCI_MANIFEST}))
    dist = client(net)
    first, second = dist.manifest(REPO, "a"), dist.manifest(REPO, "b")
    assert first is not None and second is not None
    assert (first.media_type, first.is_index, second.media_type, second.is_index) == (
        OCI_MANIFEST,
        False,
        OCI_INDEX,
        True,
    )
    assert net.sent[0].headers["Accept"].split(", ")[0] == OCI_MANIFEST


def test_manifests_are_cached_only_when_asked_and_by_digest_for_good(tmp_path: Path) -> None:
    digest = digest_of(MANIFEST)
    net = Net().on(lambda sent: Answer(200, MANIFEST) if "/manifests/" in sent.url else None)
    dist = client(net, DiskCache(tmp_path, max_age=0))
    for _ in range(2):
        dist.manifest(REPO, digest, cache=True)
        dist.manifest(REPO, "tag", cache=True)  # mutable and max_age 0: asked each time
        dist.manifest(REPO, digest)
    assert [s.url.rsplit("/", 1)[1] for s in net.sent] == [digest, "tag", digest, "tag", digest]


def test_a_blob_with_other_content_or_missing_is_refused() -> None:
    digest = digest_of(CONFIG)
    net = Net().route("GET", f"{BASE}/blobs/{digest}", Answer(200, CONFIG + b" "))
    dist = client(net)
    assert refused(lambda: dist.blob_json(REPO, digest)) == (
        f"registry 127.0.0.1:5000 answered blob {digest} of team/torch with other content"
    )
    assert refused(lambda: dist.blob_json(REPO, "sha256:" + "0" * 64)) == (
        f"registry 127.0.0.1:5000 answered HTTP 404 for {BASE}/blobs/sha256:{'0' * 64}"
    )


def test_platforms_of_a_single_image_come_from_its_config_and_of_an_index_from_its_entries() -> None:
    index = {
        "manifests": [
            {"digest": "sha256:a", "platform": {"os": "linux", "architecture": "amd64"}},
            {"digest": "sha256:u", "platform": {"os": "unknown", "architecture": "unknown"}},
        ]
    }
    net = Net().route("GET", f"{BASE}/manifests/one", Answer(200, MANIFEST))
    net.route("GET", f"{BASE}/blobs/{digest_of(CONFIG)}", Answer(200, CONFIG))
    net.route("GET", f"{BASE}/manifests/many", json_answer(index))
    dist = client(net)
    assert dist.platforms(REPO, "one") == {"linux/arm64": digest_of(MANIFEST)}  # arm64/v8 is arm64
    assert dist.platforms(REPO, "many") == {"linux/amd64": "sha256:a"}
    assert dist.platforms(REPO, "none") is None


def test_an_index_entry_the_registry_lacks_and_an_image_without_config_are_told_apart() -> None:
    index = {"manifests": [{"digest": "sha256:gone", "platform": {"os": "linux", "architecture": "amd64"}}]}
    bare = json.dumps({"schemaVersion": 2, "layers": []}).encode()
    net = Net().route("GET", f"{BASE}/manifests/idx", json_answer(index))
    net.route("GET", f"{BASE}/manifests/bare", Answer(200, bare))
    dist = client(net)
    assert refused(lambda: dist.image(REPO, "idx", "linux/amd64")) == (
        "registry 127.0.0.1:5000 lists team/torch@sha256:gone in an index but does not have it"
    )
    found = dist.image(REPO, "bare", "linux/amd64")
    assert found is not None and found[1] == {} and found[0].raw == bare


def test_blob_exists_asks_for_the_scopes_of_the_operation() -> None:
    challenge = 'Bearer realm="https://auth.example/token",service="r"'

    def registry(sent: Sent) -> Answer:
        if sent.url.startswith("https://auth.example/"):
            return json_answer({"token": sent.query["scope"][0]})
        if sent.bearer is None:
            return Answer(401, b"", {"WWW-Authenticate": challenge})
        return Answer(200 if sent.url.endswith("/here") else 404, b"")

    net = Net().on(registry)
    dist = client(net)
    assert dist.blob_exists(REPO, "here") is True
    assert dist.blob_exists(REPO, "missing", push=True) is False
    assert [s.bearer for s in net.sent if s.bearer] == ["repository:team/torch:pull", "repository:team/torch:pull,push"]
    net.handlers[:] = [lambda sent: Answer(403, b"")]
    assert refused(lambda: dist.blob_exists(REPO, "x")).startswith(
        "registry 127.0.0.1:5000 refused to read team/torch (HTTP 403): give credentials"
    )


def test_a_manifest_stored_under_another_digest_is_refused_and_a_digest_not_told_is_computed() -> None:
    net = Net().route("PUT", f"{BASE}/manifests/v1", Answer(201, b"", {"Docker-Content-Digest": "sha256:" + "f" * 64}))
    net.route("PUT", f"{BASE}/manifests/v2", Answer(201, b""))
    dist = client(net)
    assert refused(lambda: dist.put_manifest(REPO, "v1", MANIFEST, OCI_MANIFEST)) == (
        f"registry 127.0.0.1:5000 stored team/torch:v1 as sha256:{'f' * 64}, not {digest_of(MANIFEST)}"
    )
    assert dist.put_manifest(REPO, "v2", MANIFEST, OCI_MANIFEST) == digest_of(MANIFEST)
    assert (net.sent[1].headers["Content-Type"], net.sent[1].body) == (OCI_MANIFEST, MANIFEST)


def test_a_mount_is_done_or_gives_the_upload_place_the_registry_opened() -> None:
    net = Net().on(lambda sent: Answer(201, b"") if "d1" in sent.url else None)
    net.on(
        lambda sent: Answer(202, b"", {"Location": "/v2/team/torch/blobs/uploads/s?x=1"}) if "d2" in sent.url else None
    )
    net.on(lambda sent: Answer(202, b"") if "d3" in sent.url else None)
    dist = client(net)
    assert dist.mount(OTHER, REPO, "d1") is None
    assert net.sent[0].query == {"mount": ["d1"], "from": ["mirror/torch"]}
    assert dist.mount(OTHER, REPO, "d2") == "http://127.0.0.1:5000/v2/team/torch/blobs/uploads/s?x=1"
    assert refused(lambda: dist.mount(OTHER, REPO, "d3")) == (
        "registry 127.0.0.1:5000 opened an upload to team/torch without a Location"
    )


@pytest.mark.parametrize(
    ("location", "put"),
    [("/v2/team/torch/blobs/uploads/s", "/blobs/uploads/s?digest="), ("/up/s?_state=x", "/up/s?_state=x&digest=")],
)
def test_an_upload_goes_where_the_registry_said_with_the_digest(location: str, put: str) -> None:
    net = Net().route("POST", f"{BASE}/blobs/uploads/", Answer(202, b"", {"Location": location}))
    net.on(lambda sent: Answer(201, b"") if sent.method == "PUT" else None)
    digest = client(net).upload(REPO, b"layer")
    assert digest == digest_of(b"layer")
    assert net.sent[1].url.endswith(put + digest) and net.sent[1].body == b"layer"
    assert net.sent[1].headers["Content-Type"] == "application/octet-stream"


def _copy(answer: Answer | Exception, digest: str) -> tuple[Net, Distribution]:
    net = Net().on(lambda sent: Answer(200, b"") if sent.method == "HEAD" else None)
    net.route("GET", f"{OTHER.base}/blobs/{digest}", answer)
    net.on(lambda sent: Answer(201, b"") if sent.method == "PUT" else None)
    return net, client(net)


def test_a_blob_copied_between_registries_is_checked_counted_and_uploaded_where_told() -> None:
    data = b"x" * 3_000_000
    net, dist = _copy(Answer(200, data), digest_of(data))
    before = dist.http.counters.bytes
    moved = dist.copy_blob(OTHER, REPO, {"digest": digest_of(data), "size": 1}, f"{BASE}/blobs/uploads/s")
    assert moved == len(data) and dist.http.counters.bytes - before == len(data)
    assert net.sent[-1].body == data and net.sent[-1].url == f"{BASE}/blobs/uploads/s?digest={digest_of(data)}"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (Answer(200, b"other"), "answered blob {digest} with other content"),
        (Answer(500, b""), "answered HTTP 500 for {url}"),
        (Answer(200, b"x" * 100, cut_after=10), "is unreachable: ChunkedEncodingError"),
        (requests.ConnectionError("reset"), "is unreachable: ConnectionError"),
    ],
)
def test_a_blob_copy_that_fails_names_the_source_and_uploads_nothing(answer: Answer | Exception, problem: str) -> None:
    digest = digest_of(b"content")
    net, dist = _copy(answer, digest)
    message = refused(lambda: dist.copy_blob(OTHER, REPO, {"digest": digest}, f"{BASE}/blobs/uploads/s"))
    url = f"{OTHER.base}/blobs/{digest}"
    assert message == "registry 127.0.0.1:5001 " + problem.format(digest=digest, url=url)
    assert [s.method for s in net.sent if s.method == "PUT"] == []


def test_a_blob_is_copied_from_a_registry_that_takes_basic_credentials_on_every_request(tmp_path: Path) -> None:
    # an htpasswd registry (no token service) the user did `docker login` to: the streamed GET needs the
    # credentials of that registry, as the HEAD had
    logins = {"auths": {OTHER.host: {"auth": base64.b64encode(b"u:p").decode()}}}
    (tmp_path / "docker-config").mkdir()
    (tmp_path / "docker-config" / "config.json").write_text(json.dumps(logins), encoding="utf-8")
    data = b"layer"
    wanted = "dTpw"  # u:p
    net = Net().on(lambda sent: Answer(401, b"") if sent.basic != wanted and "5001" in sent.url else None)
    net.on(lambda sent: Answer(200, b"") if sent.method == "HEAD" else None)
    net.route("GET", f"{OTHER.base}/blobs/{digest_of(data)}", Answer(200, data))
    net.on(lambda sent: Answer(201, b"") if sent.method == "PUT" else None)
    dist = client(net)
    assert dist.copy_blob(OTHER, REPO, {"digest": digest_of(data)}, f"{BASE}/blobs/uploads/s") == len(data)
    assert [s.method for s in net.sent if "5001" in s.url] == ["HEAD", "GET"]


def test_a_blob_copy_the_source_refuses_to_read_says_so_and_how_to_give_credentials() -> None:
    digest = digest_of(b"layer")
    net = Net().on(lambda sent: Answer(403, b"") if sent.method == "HEAD" else None)
    assert refused(lambda: client(net).copy_blob(OTHER, REPO, {"digest": digest}, None)) == (
        "registry 127.0.0.1:5001 refused to read mirror/torch (HTTP 403): give credentials with --registry-user / "
        "TORCHYARD_REGISTRY_PASSWORD, or docker login 127.0.0.1:5001"
    )
    assert [s.method for s in net.sent] == ["HEAD"]


def test_a_streamed_blob_arrives_in_reads_of_one_mebibyte() -> None:
    data = b"y" * 3_000_000
    _, dist = _copy(Answer(200, data), digest_of(data))
    with dist.stream_blob(OTHER, digest_of(data)) as chunks:
        sizes = [len(c) for c in chunks]
    assert sizes == [1 << 20, 1 << 20, len(data) - 2 * (1 << 20)]


def test_an_unreachable_registry_is_named() -> None:
    dist = client(Net().on(lambda sent: requests.ConnectionError("refused")))
    assert refused(lambda: dist.manifest(REPO, "x")) == "registry 127.0.0.1:5000 is unreachable: ConnectionError"


# --- a registry that checks each token's scopes -------------------------------------------------------------


def test_reads_and_a_mount_ask_for_a_token_with_the_scopes_they_need() -> None:
    net = Net()
    registry = MemoryRegistry(REPO.host, referrers_api=True)
    scoped = ScopedRegistry(net, registry)
    mirror = parse_repo("127.0.0.1:5000/mirror/torch")
    registry.blobs["mirror/torch", digest_of(b"sbom")] = b"sbom"
    dist = client(net)
    assert dist.blob(mirror, digest_of(b"sbom")) == b"sbom"
    assert dist.referrers(REPO, digest_of(MANIFEST)) == {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
    assert [s.headers.get("Accept") for s in net.sent if "/referrers/" in s.url][-1] == OCI_INDEX
    assert dist.mount(mirror, REPO, digest_of(b"sbom")) is None
    assert registry.mounts == [("mirror/torch", "team/torch", digest_of(b"sbom"))]
    assert dist.upload(REPO, b"layer") == digest_of(b"layer")
    assert dist.put_manifest(REPO, "t", MANIFEST, OCI_MANIFEST) == digest_of(MANIFEST)
    assert scoped.asked == [
        ("repository:mirror/torch:pull",),
        ("repository:team/torch:pull",),
        ("repository:team/torch:pull,push", "repository:mirror/torch:pull"),
        ("repository:team/torch:pull,push",),  # the upload's start, its end and the manifest: one token
    ]


def test_a_chunked_upload_that_loses_a_connection_uses_one_push_token_throughout() -> None:
    net = Net()
    registry = MemoryRegistry(REPO.host, cuts=[300])
    scoped = ScopedRegistry(net, registry)
    dist = Distribution(
        net.http(Policy(retries=0, connect_retries=0, workers=1)), uploads=UploadPolicy(chunk=256, backoff=0.0)
    )
    lost: list[str] = []

    def close_then_drop(sent: Sent) -> Answer | Exception | None:
        """The closing PUT reaches the registry, its answer is lost: the client asks whether the blob is there."""
        if sent.method != "PUT" or not sent.bearer or lost:
            return None
        lost.append(sent.url)
        scoped.handle(sent)
        return requests.ConnectionError("the answer was lost")

    net.handlers.insert(0, close_then_drop)
    data = bytes(range(256)) * 4
    sent = dist.upload_file(REPO, io.BytesIO(data), digest_of(data), len(data))
    assert registry.blobs["team/torch", digest_of(data)] == data and sent.resumed == 1 and lost
    assert [s.method for s in net.sent if s.bearer][-1] == "HEAD"
    assert scoped.asked == [("repository:team/torch:pull,push",)]
    writes = [s for s in net.sent if s.method in ("PATCH", "PUT") and s.bearer]
    assert {s.headers["Content-Type"] for s in writes} == {"application/octet-stream"}
    assert [s.method for s in net.sent if s.method == "GET" and s.bearer] == ["GET"]  # the status after the cut


def test_refusals_of_reads_and_writes_say_which_it_was() -> None:
    net = Net().on(lambda sent: Answer(403, b"", {"Content-Type": OCI_INDEX}))
    dist = Distribution(net.http(Policy(retries=0, workers=1)), uploads=UploadPolicy(chunk=256))
    mirror = parse_repo("127.0.0.1:5000/mirror/torch")
    for call, what in [
        (lambda: dist.blob(REPO, "sha256:1"), "read"),
        (lambda: dist.blob_json(REPO, "sha256:1"), "read"),
        (lambda: dist.mount(mirror, REPO, "sha256:1"), "write"),
        (lambda: dist.upload_file(REPO, io.BytesIO(b"x" * 600), digest_of(b"x" * 600), 600), "write"),  # chunked
        (lambda: dist.upload(REPO, b"x"), "write"),
        (lambda: dist.upload(REPO, b"x", location=f"{BASE}/blobs/uploads/s"), "write"),  # its closing PUT
        (lambda: dist.referrers(REPO, "sha256:1"), "read"),
    ]:
        assert refused(call).startswith(f"registry 127.0.0.1:5000 refused to {what} team/torch (HTTP 403): ")


@pytest.mark.parametrize(
    ("status", "content_type"), [(200, "text/html"), (404, OCI_INDEX), (404, "")], ids=["a page", "404 typed", "404"]
)
def test_a_registry_without_the_referrers_api_has_none(status: int, content_type: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    net = Net().on(lambda sent: Answer(status, b"<html>" if status == 200 else b"{}", headers))
    assert client(net).referrers(REPO, digest_of(MANIFEST)) is None


def test_config_blobs_are_cached_when_the_platforms_are_asked_with_the_cache(tmp_path: Path) -> None:
    net = Net().route("GET", f"{BASE}/manifests/{digest_of(MANIFEST)}", Answer(200, MANIFEST))
    net.route("GET", f"{BASE}/blobs/{digest_of(CONFIG)}", Answer(200, CONFIG))
    dist = client(net, DiskCache(tmp_path, max_age=0))
    for _ in range(2):
        assert dist.platforms(REPO, digest_of(MANIFEST), cache=True) == {"linux/arm64": digest_of(MANIFEST)}
    assert len(net.urls("GET")) == 2  # the manifest by digest and its config: once each
    dist.platforms(REPO, digest_of(MANIFEST))
    dist.blob_json(REPO, digest_of(CONFIG))
    assert len(net.urls("GET")) == 5  # without the cache: asked again


def test_an_image_without_a_config_names_no_platform() -> None:
    bare = json.dumps({"schemaVersion": 2, "layers": []}).encode()
    net = Net().route("GET", f"{BASE}/manifests/bare", Answer(200, bare))
    assert client(net).platforms(REPO, "bare") == {"/": digest_of(bare)}
    assert [u for u in net.urls() if "/blobs/" in u] == []


def test_a_small_blob_is_sent_in_one_request_and_counted() -> None:
    net = Net().route(
        "POST", f"{BASE}/blobs/uploads/", Answer(202, b"", {"Location": "/v2/team/torch/blobs/uploads/s"})
    )
    net.on(lambda sent: Answer(201, b"") if sent.method == "PUT" else None)
    sent = client(net).upload_file(REPO, io.BytesIO(b"abc"), digest_of(b"abc"), 3)
    assert sent.bytes == 3 and net.sent[-1].body == b"abc"


def test_a_chunked_upload_closes_at_a_location_without_a_query_with_a_question_mark() -> None:
    where = "/v2/team/torch/blobs/uploads/s"
    net = Net().route("POST", f"{BASE}/blobs/uploads/", Answer(202, b"", {"Location": where}))
    net.on(lambda sent: Answer(202, b"", {"Location": where}) if sent.method == "PATCH" else None)
    net.on(lambda sent: Answer(201, b"") if sent.method == "PUT" else None)
    dist = Distribution(net.http(Policy(retries=0, connect_retries=0, workers=1)), uploads=UploadPolicy(chunk=2))
    dist.upload_file(REPO, io.BytesIO(b"abcd"), digest_of(b"abcd"), 4)
    put = net.sent[-1]
    assert put.url == f"{BASE}/blobs/uploads/s?digest={digest_of(b'abcd')}"
    assert put.headers["Content-Type"] == "application/octet-stream"


def test_a_mount_refused_opens_the_upload_a_large_blob_is_sent_into_in_chunks() -> None:
    data = b"y" * 1000
    net = Net()
    registry = MemoryRegistry(REPO.host, mountable=False).attach(net)
    dist = Distribution(net.http(Policy(workers=1)), uploads=UploadPolicy(chunk=256), docker_login=False)
    location = dist.mount(OTHER, REPO, digest_of(data))
    assert location is not None
    dist.upload_file(REPO, io.BytesIO(data), digest_of(data), len(data), location)
    assert registry.blobs["team/torch", digest_of(data)] == data and net.urls("POST") == [net.sent[0].url]


def test_a_copy_counts_the_bytes_that_came_not_the_size_its_descriptor_claims() -> None:
    _, dist = _copy(Answer(200, b""), digest_of(b""))
    assert dist.copy_blob(OTHER, REPO, {"digest": digest_of(b""), "size": 7}, f"{BASE}/blobs/uploads/s") == 0


def test_a_blob_larger_than_the_memory_limit_is_on_disk_before_it_is_uploaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """(On disk before the upload: requests' own length check, fileno(), would move any spool to disk.)"""
    monkeypatch.setattr(client_module, "BIG_BLOB", 1000)
    on_disk: list[bool] = []
    upload = Distribution.upload_file

    def seen(self: Distribution, repo: Any, data: Any, *args: Any) -> Any:
        on_disk.append(data._rolled)
        return upload(self, repo, data, *args)

    monkeypatch.setattr(Distribution, "upload_file", seen)
    for size in (3000, 500):
        data = b"z" * size
        _, dist = _copy(Answer(200, data), digest_of(data))
        dist.copy_blob(OTHER, REPO, {"digest": digest_of(data)}, f"{BASE}/blobs/uploads/s")
    assert on_disk == [True, False]


def test_a_request_budget_spent_while_a_blob_is_copied_is_named() -> None:
    digest = digest_of(b"content")
    net = Net().on(lambda sent: Answer(200, b"") if sent.method == "HEAD" else None)
    net.route("GET", f"{OTHER.base}/blobs/{digest}", Answer(200, b"content"))
    dist = Distribution(net.http(Policy(retries=0, connect_retries=0, workers=1, budget=1)))
    assert refused(lambda: dist.copy_blob(OTHER, REPO, {"digest": digest}, None)) == (
        "registry 127.0.0.1:5001 is unreachable: request budget spent: 1 requests (raise it with --max-requests)"
    )


def test_a_manifest_that_names_no_media_type_anywhere_has_none() -> None:
    net = Net().route("GET", f"{BASE}/manifests/a", Answer(200, MANIFEST))
    found = client(net).manifest(REPO, "a")
    assert found is not None and found.media_type == ""


def test_a_request_answered_401_is_sent_again_whole_with_the_token() -> None:
    """The first request to a scope is refused for want of a token; its retry carries the same body, query and
    cache use: a manifest PUT keeps its bytes, a mount its source, a cached read is stored."""
    net = Net()
    registry = MemoryRegistry(REPO.host)
    ScopedRegistry(net, registry)
    registry.blobs["mirror/torch", digest_of(b"l")] = b"l"
    dist = client(net)
    assert dist.put_manifest(REPO, "t", MANIFEST, OCI_MANIFEST) == digest_of(MANIFEST)
    assert registry.manifests["team/torch", "t"][0] == MANIFEST
    assert dist.mount(parse_repo("127.0.0.1:5000/mirror/torch"), REPO, digest_of(b"l")) is None


def test_a_read_answered_401_then_200_is_cached(tmp_path: Path) -> None:
    net = Net()
    registry = MemoryRegistry(REPO.host)
    ScopedRegistry(net, registry)
    registry.manifests["team/torch", digest_of(MANIFEST)] = (MANIFEST, OCI_MANIFEST)
    dist = client(net, DiskCache(tmp_path, max_age=0))
    for _ in range(2):
        assert dist.manifest(REPO, digest_of(MANIFEST), cache=True) is not None
    assert [s.bearer is None for s in net.sent if "/manifests/" in s.url] == [True, False]


def test_a_403_with_a_bearer_challenge_is_a_refusal_not_a_token_request() -> None:
    challenge = 'Bearer realm="https://auth.example/token",error="insufficient_scope"'
    net = Net().on(lambda sent: Answer(403, b"", {"WWW-Authenticate": challenge}))
    assert refused(lambda: client(net).manifest(REPO, "x")).startswith("registry 127.0.0.1:5000 refused to read")
    assert [s.url for s in net.sent if "auth.example" in s.url] == []


def test_a_spent_request_budget_is_named_as_such() -> None:
    net = Net().on(lambda sent: Answer(200, MANIFEST))
    dist = Distribution(net.http(Policy(retries=0, connect_retries=0, workers=1, budget=0)))
    assert refused(lambda: dist.manifest(REPO, "x")) == (
        "registry 127.0.0.1:5000 is unreachable: request budget spent: 0 requests (raise it with --max-requests)"
    )
