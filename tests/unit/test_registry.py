"""The registry client (builder/oci, builder/pipeline/registry.py) over a fake network: which URLs it asks, how it
authenticates (basic, bearer tokens with the scopes it needs, anonymous tokens as Docker Hub issues them),
which platform it reads from an index, how it retries, and the one-line errors a user gets."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from http_kit import Answer, Net, Sent, json_answer
from registry_kit import MemoryRegistry

from builder.core.errors import PushError, UsageError
from builder.engine import RegistryAuth
from builder.net.http import Policy
from builder.oci.client import Distribution, digest_of
from builder.oci.refs import ImageRef, RepoRef, parse_ref, parse_repo, platform_fields, platform_of
from builder.pipeline.plan import CONTENT_LABEL
from builder.pipeline.registry import Registry, layer_sizes

HOST = "127.0.0.1:5000"
BASE = f"http://{HOST}/v2/team/torch"
TAG = "2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
REF = f"{HOST}/team/torch:{TAG}"
TAG_URL = f"{BASE}/manifests/{TAG}"
LABELS = {"io.torchyard.content-hash": "ab" * 32, "io.torchyard.flavor": "runtime"}
CONFIG = {"architecture": "amd64", "os": "linux", "config": {"Labels": LABELS, "Env": ["PATH=/opt/venv/bin"]}}
CONFIG_RAW = json.dumps(CONFIG).encode()
CONFIG_DIGEST = digest_of(CONFIG_RAW)
ARM_CONFIG: dict[str, Any] = {
    "architecture": "arm64",
    "os": "linux",
    "config": {"Labels": {"io.torchyard.content-hash": "cd" * 32}},
}
ARM_CONFIG_RAW = json.dumps(ARM_CONFIG).encode()


def manifest_for(config_raw: bytes) -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "digest": digest_of(config_raw),
                "size": len(config_raw),
            },
            "layers": [],
        }
    ).encode()


MANIFEST = manifest_for(CONFIG_RAW)
ARM_MANIFEST = manifest_for(ARM_CONFIG_RAW)
INDEX: dict[str, Any] = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [
        {"digest": digest_of(ARM_MANIFEST), "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
        {"digest": digest_of(MANIFEST), "platform": {"os": "linux", "architecture": "amd64"}},
        {"digest": "sha256:" + "0" * 64, "platform": {"os": "unknown", "architecture": "unknown"}},
    ],
}


def store(net: Net, base: str, routes: dict[str, bytes]) -> Net:
    """A registry holding `routes` (manifests/<ref> or blobs/<digest> -> bytes), GET and HEAD."""

    def handler(sent: Sent) -> Answer | None:
        for path, body in routes.items():
            if sent.url.split("?")[0] == f"{base}/{path}" and sent.method in ("GET", "HEAD"):
                return Answer(200, body, {"Docker-Content-Digest": digest_of(body)})
        return None

    return net.on(handler)


def plain(net: Net) -> Net:
    return store(net, BASE, {f"manifests/{TAG}": MANIFEST, f"blobs/{CONFIG_DIGEST}": CONFIG_RAW})


def registry(net: Net, auth: RegistryAuth | None = None) -> Registry:
    return Registry(auth, client=Distribution(net.http(Policy(retries=2, connect_retries=2, workers=1)), auth))


@pytest.fixture(autouse=True)
def no_docker_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty docker config of the test's own: the host's `docker login`s must not leak in."""
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    return tmp_path / "docker-config"


def docker_login(config: Path, host: str, user: str, password: str) -> None:
    """What `docker login HOST` leaves in $DOCKER_CONFIG/config.json (no credential helper)."""
    config.mkdir(exist_ok=True)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": token}}}))


# --- references ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "host", "name", "base"),
    [
        ("127.0.0.1:5000/team/torch", "127.0.0.1:5000", "team/torch", "http://127.0.0.1:5000/v2/team/torch"),
        ("127.0.0.2/torch", "127.0.0.2", "torch", "http://127.0.0.2/v2/torch"),
        ("localhost:5000/torch", "localhost:5000", "torch", "http://localhost:5000/v2/torch"),
        ("localhost/torch", "localhost", "torch", "http://localhost/v2/torch"),
        ("[::1]:5000/torch", "[::1]:5000", "torch", "http://[::1]:5000/v2/torch"),
        (
            "registry.corp.example/ml/torch",
            "registry.corp.example",
            "ml/torch",
            "https://registry.corp.example/v2/ml/torch",
        ),
        ("10.0.0.5:5000/torch", "10.0.0.5:5000", "torch", "https://10.0.0.5:5000/v2/torch"),
        ("team/torch", "registry-1.docker.io", "team/torch", "https://registry-1.docker.io/v2/team/torch"),
        ("torchyard", "registry-1.docker.io", "library/torchyard", "https://registry-1.docker.io/v2/library/torchyard"),
        (
            "docker.io/library/debian",
            "registry-1.docker.io",
            "library/debian",
            "https://registry-1.docker.io/v2/library/debian",
        ),
        (
            "docker.io/debian",
            "registry-1.docker.io",
            "library/debian",
            "https://registry-1.docker.io/v2/library/debian",
        ),
        (
            "index.docker.io/nvidia/cuda",
            "registry-1.docker.io",
            "nvidia/cuda",
            "https://registry-1.docker.io/v2/nvidia/cuda",
        ),
        ("ghcr.io/acme/torchyard", "ghcr.io", "acme/torchyard", "https://ghcr.io/v2/acme/torchyard"),
    ],
)
def test_parse_repo(repo: str, host: str, name: str, base: str) -> None:
    found = parse_repo(repo)
    assert found == RepoRef(host, name)
    assert found.base == base


DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("debian:bookworm-slim", ImageRef(RepoRef("registry-1.docker.io", "library/debian"), "bookworm-slim", None)),
        (
            "nvidia/cuda:12.4.1-base-ubuntu22.04",
            ImageRef(RepoRef("registry-1.docker.io", "nvidia/cuda"), "12.4.1-base-ubuntu22.04", None),
        ),
        (f"127.0.0.1:5000/team/img@{DIGEST}", ImageRef(RepoRef(HOST, "team/img"), None, DIGEST)),
        (f"ghcr.io/a/b:v1@{DIGEST}", ImageRef(RepoRef("ghcr.io", "a/b"), "v1", DIGEST)),
        ("127.0.0.1:5000/team/img", ImageRef(RepoRef(HOST, "team/img"), None, None)),
    ],
)
def test_parse_ref(text: str, expected: ImageRef) -> None:
    assert parse_ref(text) == expected


def test_the_manifests_endpoint_is_asked_for_the_digest_else_the_tag_else_latest() -> None:
    # docker's default tag: a reference without one reads the manifest "latest", as `docker pull` would
    assert [parse_ref(t).reference for t in ("a/b", "a/b:v1", f"a/b:v1@{DIGEST}", f"a/b@{DIGEST}")] == [
        "latest",
        "v1",
        DIGEST,
        DIGEST,
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Debian:12", r"bad repository name 'library/Debian'"),
        ("debian:bad tag", r"bad tag 'bad tag'"),
        ("debian@sha256:abc", r"bad digest 'sha256:abc'"),
        (":x", r"no repository"),
    ],
)
def test_parse_ref_refuses_with_one_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=rf"^SRC {re.escape(repr(text))}: {message}"):
        parse_ref(text, "SRC")


def test_platforms_read_and_written() -> None:
    assert platform_of({"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}}) == "linux/arm64"
    assert platform_of({"os": "linux", "architecture": "arm", "variant": "v7"}) == "linux/arm/v7"
    assert platform_fields("linux/arm64") == {"os": "linux", "architecture": "arm64"}
    with pytest.raises(UsageError, match="expected os/architecture"):
        platform_fields("arm64")


# --- reading labels ---------------------------------------------------------------------------------------


def test_a_tag_the_registry_does_not_have_is_none() -> None:
    net = Net()
    assert registry(net).labels(REF) is None
    assert net.urls() == [TAG_URL]


def test_labels_come_from_the_config_blob() -> None:
    net = plain(Net())
    assert registry(net).labels(REF) == LABELS
    manifest, blob = net.sent
    assert manifest.url == TAG_URL
    assert manifest.headers["Accept"].split(", ") == [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
    assert (blob.url, blob.headers["Accept"]) == (f"{BASE}/blobs/{CONFIG_DIGEST}", "application/json")
    assert "Authorization" not in manifest.headers


def test_an_image_without_labels_has_none() -> None:
    bare = json.dumps({"config": {"Labels": None}}).encode()
    net = store(Net(), BASE, {f"manifests/{TAG}": manifest_for(bare), f"blobs/{digest_of(bare)}": bare})
    assert registry(net).labels(REF) == {}


def test_a_manifest_without_config_is_none() -> None:
    net = store(Net(), BASE, {f"manifests/{TAG}": json.dumps({"schemaVersion": 1, "fsLayers": []}).encode()})
    assert registry(net).labels(REF) is None


def indexed(net: Net, listing: dict[str, Any]) -> Net:
    return store(
        net,
        BASE,
        {
            f"manifests/{TAG}": json.dumps(listing).encode(),
            f"manifests/{digest_of(MANIFEST)}": MANIFEST,
            f"manifests/{digest_of(ARM_MANIFEST)}": ARM_MANIFEST,
            f"blobs/{CONFIG_DIGEST}": CONFIG_RAW,
            f"blobs/{digest_of(ARM_CONFIG_RAW)}": ARM_CONFIG_RAW,
        },
    )


def test_an_index_leads_to_the_asked_platform() -> None:
    net = indexed(Net(), INDEX)
    assert registry(net).labels(REF) == LABELS
    assert net.urls() == [TAG_URL, f"{BASE}/manifests/{digest_of(MANIFEST)}", f"{BASE}/blobs/{CONFIG_DIGEST}"]
    assert registry(indexed(Net(), INDEX)).labels(REF, "linux/arm64") == ARM_CONFIG["config"]["Labels"]


def test_a_docker_manifest_list_without_media_type_is_an_index_too() -> None:
    net = indexed(Net(), {"schemaVersion": 2, "manifests": INDEX["manifests"]})
    assert registry(net).labels(REF) == LABELS


def test_an_index_without_the_platform_is_a_clear_error() -> None:
    net = indexed(Net(), dict(INDEX, manifests=INDEX["manifests"][:1]))
    with pytest.raises(PushError, match=r"^the registry holds no linux/amd64 image under this tag$"):
        registry(net).labels(REF)


def test_a_manifest_whose_content_is_not_its_digest_is_refused() -> None:
    wrong = dict(
        INDEX, manifests=[{"digest": "sha256:" + "1" * 64, "platform": {"os": "linux", "architecture": "amd64"}}]
    )
    net = store(Net(), BASE, {f"manifests/{TAG}": json.dumps(wrong).encode(), f"manifests/sha256:{'1' * 64}": MANIFEST})
    with pytest.raises(PushError, match=r"answered team/torch@sha256:1{64} with content of sha256:"):
        registry(net).labels(REF)


def test_docker_hub_is_asked_over_https_on_its_api_host() -> None:
    net = Net()
    assert registry(net).labels("torchyard:latest-runtime") is None
    assert registry(net).labels("docker.io/library/debian:bookworm-slim") is None
    assert net.urls() == [
        "https://registry-1.docker.io/v2/library/torchyard/manifests/latest-runtime",
        "https://registry-1.docker.io/v2/library/debian/manifests/bookworm-slim",
    ]


def test_holds_compares_the_content_hash() -> None:
    assert registry(plain(Net())).holds(REF, "ab" * 32)
    assert not registry(plain(Net())).holds(REF, "cd" * 32)
    assert not registry(Net()).holds(REF, "ab" * 32)
    assert registry(indexed(Net(), INDEX)).holds(REF, "cd" * 32, "linux/arm64")


# --- authentication ---------------------------------------------------------------------------------------

AUTH = RegistryAuth("ci", "registry-pa55")
GOOD_BASIC = base64.b64encode(b"ci:registry-pa55").decode()


def basic_gate(net: Net) -> Net:
    """htpasswd registry: anything without the right basic credentials is 401 with a Basic challenge."""

    def gate(sent: Sent) -> Answer | None:
        if sent.basic == GOOD_BASIC:
            return None
        return Answer(401, b'{"errors":[]}', {"WWW-Authenticate": 'Basic realm="Registry"'})

    return net.on(gate)


def test_basic_auth_registry_gets_the_credentials() -> None:
    net = plain(basic_gate(Net()))
    assert registry(net, AUTH).labels(REF) == LABELS
    assert [s.basic for s in net.sent] == [GOOD_BASIC] * 2


def test_basic_auth_registry_without_credentials_says_how_to_give_them() -> None:
    net = plain(basic_gate(Net()))
    with pytest.raises(PushError) as raised:
        registry(net).labels(REF)
    assert str(raised.value) == (
        f"registry {HOST} refused to read team/torch (HTTP 401): "
        f"give credentials with --registry-user / TORCHYARD_REGISTRY_PASSWORD, or docker login {HOST}"
    )
    assert raised.value.exit_code == 5


def test_the_users_docker_login_for_that_registry_is_used(no_docker_login: Path) -> None:
    docker_login(no_docker_login, HOST, "ci", "registry-pa55")
    net = plain(basic_gate(Net()))
    assert registry(net).labels(REF) == LABELS


def test_given_credentials_win_over_docker_login_and_other_hosts_logins_are_not_sent(no_docker_login: Path) -> None:
    docker_login(no_docker_login, HOST, "someone", "else")
    net = plain(basic_gate(Net()))
    assert registry(net, AUTH).labels(REF) == LABELS
    assert {s.basic for s in net.sent} == {GOOD_BASIC}
    docker_login(no_docker_login, "registry.corp.example", "ci", "registry-pa55")
    with pytest.raises(PushError, match="refused to read team/torch"):
        registry(plain(basic_gate(Net()))).labels(REF)


def test_an_unreadable_docker_config_is_no_login(no_docker_login: Path) -> None:
    no_docker_login.mkdir()
    (no_docker_login / "config.json").write_text("{not json")
    with pytest.raises(PushError, match=r"\(HTTP 401\): give credentials"):
        registry(plain(basic_gate(Net()))).labels(REF)


def test_wrong_credentials_are_refused_the_same_way() -> None:
    with pytest.raises(PushError, match=r"refused to read team/torch \(HTTP 401\)"):
        registry(plain(basic_gate(Net())), RegistryAuth("ci", "wrong")).labels(REF)


def test_forbidden_is_refused() -> None:
    net = Net().on(lambda sent: Answer(403, b"{}"))
    with pytest.raises(PushError, match=r"refused to read team/torch \(HTTP 403\)"):
        registry(net, AUTH).labels(REF)


REALM = "https://auth.corp.example/token"
CHALLENGE = f'Bearer realm="{REALM}",service="registry.corp.example",scope="repository:team/torch:pull"'


def bearer_gate(token_key: str = "token", anonymous: bool = False) -> Callable[[Sent], Answer | None]:
    def gate(sent: Sent) -> Answer | None:
        if sent.url.startswith(REALM):
            if not anonymous and sent.basic != GOOD_BASIC:
                return json_answer({"details": "incorrect username or password"}, status=401)
            return json_answer({token_key: "tok-123", "expires_in": 300})
        if sent.bearer == "tok-123":
            return None
        return Answer(401, b'{"errors":[]}', {"WWW-Authenticate": CHALLENGE})

    return gate


@pytest.mark.parametrize("token_key", ["token", "access_token"])
def test_bearer_registry_gets_a_token_once(token_key: str) -> None:
    net = plain(Net().on(bearer_gate(token_key)))
    assert registry(net, AUTH).labels(REF) == LABELS
    assert [s.url.split("?")[0] for s in net.sent] == [TAG_URL, REALM, TAG_URL, f"{BASE}/blobs/{CONFIG_DIGEST}"]
    token = net.sent[1]
    assert token.basic == GOOD_BASIC
    assert token.query == {"service": ["registry.corp.example"], "scope": ["repository:team/torch:pull"]}
    assert net.sent[2].bearer == "tok-123"
    assert (net.sent[3].bearer, net.sent[3].basic) == ("tok-123", None)


def test_docker_hub_style_anonymous_tokens_need_no_credentials() -> None:
    net = plain(Net().on(bearer_gate(anonymous=True)))
    assert registry(net).labels(REF) == LABELS
    assert net.sent[1].basic is None


def test_a_token_service_that_refuses_is_named() -> None:
    with pytest.raises(PushError) as raised:
        registry(plain(Net().on(bearer_gate()))).labels(REF)
    assert str(raised.value) == f"token service {REALM} refused (HTTP 401)"


def test_an_expired_token_is_renewed_on_the_next_401() -> None:
    tokens = iter(["tok-1", "tok-2"])
    current = {"valid": ""}

    def gate(sent: Sent) -> Answer | None:
        if sent.url.startswith(REALM):
            current["valid"] = next(tokens)
            return json_answer({"token": current["valid"], "expires_in": 300})
        if sent.bearer == current["valid"]:
            return None
        return Answer(401, b"", {"WWW-Authenticate": CHALLENGE})

    net = plain(Net().on(gate))
    client = registry(net)
    assert client.labels(REF) == LABELS
    current["valid"] = "revoked"
    assert client.labels(REF) == LABELS
    assert [s.bearer for s in net.sent if s.url == TAG_URL] == [None, "tok-1", "tok-1", "tok-2"]


# --- unreachable, broken, busy ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (requests.ConnectionError("[Errno 111] Connection refused"), "ConnectionError"),
        (requests.exceptions.ReadTimeout("read timed out"), "ReadTimeout"),
        (requests.exceptions.SSLError("CERTIFICATE_VERIFY_FAILED"), "SSLError"),
    ],
)
def test_an_unreachable_registry_is_a_push_error_after_the_retries(error: Exception, name: str) -> None:
    net = Net().on(lambda sent: error)
    with pytest.raises(PushError) as raised:
        registry(net, AUTH).labels(REF)
    assert str(raised.value) == f"registry {HOST} is unreachable: {name}"
    assert raised.value.exit_code == 5
    assert len(net.sent) == 3 and len(net.waits) == 2


def test_a_lasting_server_error_names_the_status_and_url() -> None:
    net = Net().on(lambda sent: Answer(500, b"{}"))
    with pytest.raises(PushError) as raised:
        registry(net).labels(REF)
    assert str(raised.value) == f"registry {HOST} answered HTTP 500 for {TAG_URL}"
    assert len(net.sent) == 3


def test_429_and_503_are_waited_out() -> None:
    busy = iter([Answer(429, b"", {"Retry-After": "2"}), Answer(503, b"")])
    net = plain(Net().on(lambda sent: next(busy, None)))
    assert registry(net).labels(REF) == LABELS
    assert net.waits == [2.0, 1.0]


def test_credentials_never_reach_an_error_message() -> None:
    messages = []
    for net in (plain(basic_gate(Net())), plain(Net().on(bearer_gate())), Net().on(lambda s: Answer(500, b""))):
        with pytest.raises(PushError) as raised:
            registry(net, RegistryAuth("ci", "wrong-pa55")).labels(REF)
        messages.append(str(raised.value))
    assert not [m for m in messages if re.search("pa55|ci:", m)]


def test_retag_puts_the_source_manifest_byte_for_byte_and_says_when_nothing_changed() -> None:
    """Issue 44: an alias is the signed image's manifest itself, never the engine's re-push of it."""
    net = Net()
    memory = MemoryRegistry("127.0.0.1:5000").attach(net)
    registry = Registry(client=Distribution(net.http()))
    digest = memory.add_index("t", "2.15.0-full", {"linux/amd64": memory.add_image("t", "x", labels={"a": "1"})})
    memory.add_image("t", "latest", labels={"a": "1"})  # same labels, another manifest: the content label can't tell

    assert registry.retag("127.0.0.1:5000/t:2.15.0-full", "127.0.0.1:5000/t:latest") == (digest, True)
    assert memory.manifests["t", "latest"] == memory.manifests["t", "2.15.0-full"]
    assert registry.retag("127.0.0.1:5000/t:2.15.0-full", "127.0.0.1:5000/t:latest") == (digest, False)
    with pytest.raises(PushError, match=r"127.0.0.1:5000/t:gone is not in the registry: nothing to move latest to"):
        registry.retag("127.0.0.1:5000/t:gone", "127.0.0.1:5000/t:latest")
    with pytest.raises(PushError, match="another repository"):
        registry.retag("127.0.0.1:5000/t:2.15.0-full", "127.0.0.1:5000/u:latest")
    memory.refuse_puts = True
    with pytest.raises(PushError):
        registry.retag("127.0.0.1:5000/t:2.15.0-full", "127.0.0.1:5000/t:other")


def test_check_push_opens_an_upload_and_cancels_it() -> None:
    net = Net()
    memory = MemoryRegistry("127.0.0.1:5000").attach(net)
    Registry(client=Distribution(net.http())).check_push("127.0.0.1:5000/team/torch")
    assert memory.cancelled == ["session-1"] and memory.partial == {} and memory.blobs == {}


def test_check_push_names_a_read_only_registry_and_missing_permission() -> None:
    net = Net()
    MemoryRegistry("127.0.0.1:5000", read_only=True).attach(net)
    registry = Registry(client=Distribution(net.http()))
    with pytest.raises(PushError) as caught:
        registry.check_push("127.0.0.1:5000/team/torch")
    assert str(caught.value) == (
        "registry 127.0.0.1:5000 will not take a push to team/torch (HTTP 405): "
        "is it read-only (a mirror or a pull-through cache)?"
    )
    assert caught.value.exit_code == 5
    denied = Net()
    denied.on(lambda sent: Answer(403, b"") if sent.method == "POST" else None)
    with pytest.raises(PushError, match=r"refused to write team/torch \(HTTP 403\): give credentials"):
        Registry(client=Distribution(denied.http())).check_push("127.0.0.1:5000/team/torch")


def test_layer_sizes_reads_the_manifest_only_and_none_for_an_index_or_nothing() -> None:
    net = Net()
    memory = MemoryRegistry("127.0.0.1:5000").attach(net)
    registry = Registry(client=Distribution(net.http()))
    child = memory.add_image("t", "one")
    memory.add_index("t", "both", {"linux/amd64": child})
    layers = json.loads(memory.manifests["t", "one"][0])["layers"]
    assert layer_sizes(registry.read("127.0.0.1:5000/t:one")) == {layers[0]["digest"]: 3200}
    assert layer_sizes(registry.read("127.0.0.1:5000/t:both")) is None
    assert layer_sizes(registry.read("127.0.0.1:5000/t:gone")) is None
    assert [s.method for s in net.sent if "/blobs/" in s.url] == [], "no blob is read"


def test_holding_reads_the_tag_once_and_answers_its_digest_only_for_that_content() -> None:
    net = Net()
    memory = MemoryRegistry("127.0.0.1:5000").attach(net)
    registry = Registry(client=Distribution(net.http()))
    memory.add_image("t", "one", labels={CONTENT_LABEL: "ab" * 32})
    digest = registry.digest("127.0.0.1:5000/t:one")
    before = len([s for s in net.sent if "/manifests/" in s.url])
    assert registry.holding("127.0.0.1:5000/t:one", "ab" * 32) == digest
    assert len([s for s in net.sent if "/manifests/" in s.url]) == before + 1, "the tag is read once"
    assert registry.holding("127.0.0.1:5000/t:one", "cd" * 32) is None
    assert registry.holding("127.0.0.1:5000/t:gone", "ab" * 32) is None
