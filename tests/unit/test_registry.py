"""The registry v2 label reader (builder/registry.py) over a fake requests session: which URL it asks,
how it authenticates (basic, bearer token), and the one-line errors a user gets."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

import builder.registry
from builder.engine import RegistryAuth
from builder.errors import PushError
from builder.registry import Registry, RepoRef, parse_repo

HOST = "127.0.0.1:5000"
BASE = f"http://{HOST}/v2/team/torch"
REF = f"{HOST}/team/torch:2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
TAG_URL = f"{BASE}/manifests/2.14.1-cuda13.0-cudnn9-py3.11-debian12-runtime"
LABELS = {"io.torchyard.content-hash": "ab" * 32, "io.torchyard.flavor": "runtime"}
MANIFEST = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
    "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:c0"},
    "layers": [],
}
CONFIG = {"architecture": "amd64", "os": "linux", "config": {"Labels": LABELS, "Env": ["PATH=/opt/venv/bin"]}}
INDEX: dict[str, Any] = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [
        {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}},
        {"digest": "sha256:att", "platform": {"os": "unknown", "architecture": "unknown"}},
    ],
}


@dataclass
class Sent:
    url: str
    headers: dict[str, str]
    auth: tuple[str, str] | None
    params: dict[str, str] | None


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r._content = json.dumps(body).encode() if body is not None else b""
    r.headers.update(headers or {})
    return r


Handler = Callable[[Sent], requests.Response]


@dataclass
class FakeSession:
    """requests.Session.get, answered from `routes` (url -> body) through an optional auth gate."""

    routes: dict[str, Any]
    gate: Callable[[Sent], requests.Response | None] = lambda sent: None
    error: Exception | None = None
    sent: list[Sent] = field(default_factory=list)

    def get(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        auth: tuple[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> requests.Response:
        assert timeout == builder.registry.TIMEOUT
        sent = Sent(url, dict(headers or {}), auth, params)
        self.sent.append(sent)
        if self.error is not None:
            raise self.error
        refused = self.gate(sent)
        if refused is not None:
            return refused
        if url not in self.routes:
            return response(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})
        return response(200, self.routes[url])


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


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeSession]:
    def make(routes: dict[str, Any], **kwargs: Any) -> FakeSession:
        fake = FakeSession(routes, **kwargs)
        monkeypatch.setattr("builder.registry.requests.Session", lambda: fake)
        return fake

    return make


PLAIN = {TAG_URL: MANIFEST, f"{BASE}/blobs/sha256:c0": CONFIG}


# --- parse_repo ------------------------------------------------------------------------------------------


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
    ],
)
def test_parse_repo(repo: str, host: str, name: str, base: str) -> None:
    found = parse_repo(repo)
    assert found == RepoRef(host, name)
    assert found.base == base


# --- reading labels ---------------------------------------------------------------------------------------


def test_a_tag_the_registry_does_not_have_is_none(session: Callable[..., FakeSession]) -> None:
    fake = session({})
    assert Registry().labels(REF) is None
    assert [s.url for s in fake.sent] == [TAG_URL]


def test_labels_come_from_the_config_blob(session: Callable[..., FakeSession]) -> None:
    fake = session(PLAIN)
    assert Registry().labels(REF) == LABELS
    manifest, blob = fake.sent
    assert manifest.url == TAG_URL
    assert manifest.headers["Accept"].split(", ") == [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
    assert (blob.url, blob.headers["Accept"]) == (f"{BASE}/blobs/sha256:c0", "application/json")
    assert manifest.auth is None and "Authorization" not in manifest.headers


def test_an_image_without_labels_has_none(session: Callable[..., FakeSession]) -> None:
    session({TAG_URL: MANIFEST, f"{BASE}/blobs/sha256:c0": {"config": {"Labels": None}}})
    assert Registry().labels(REF) == {}


def test_a_manifest_without_config_is_none(session: Callable[..., FakeSession]) -> None:
    session({TAG_URL: {"schemaVersion": 1, "fsLayers": []}})
    assert Registry().labels(REF) is None


def test_an_index_leads_to_the_linux_amd64_manifest(session: Callable[..., FakeSession]) -> None:
    fake = session({TAG_URL: INDEX, f"{BASE}/manifests/sha256:amd": MANIFEST, f"{BASE}/blobs/sha256:c0": CONFIG})
    assert Registry().labels(REF) == LABELS
    assert [s.url for s in fake.sent] == [TAG_URL, f"{BASE}/manifests/sha256:amd", f"{BASE}/blobs/sha256:c0"]


def test_a_docker_manifest_list_without_media_type_is_an_index_too(session: Callable[..., FakeSession]) -> None:
    listing = {"schemaVersion": 2, "manifests": INDEX["manifests"]}
    session({TAG_URL: listing, f"{BASE}/manifests/sha256:amd": MANIFEST, f"{BASE}/blobs/sha256:c0": CONFIG})
    assert Registry().labels(REF) == LABELS


def test_an_index_without_amd64_is_a_clear_error(session: Callable[..., FakeSession]) -> None:
    only_arm = dict(INDEX, manifests=INDEX["manifests"][:1])
    session({TAG_URL: only_arm})
    with pytest.raises(PushError, match=r"^the registry holds no linux/amd64 image under this tag$"):
        Registry().labels(REF)


def test_docker_hub_is_asked_over_https(session: Callable[..., FakeSession]) -> None:
    fake = session({})
    assert Registry().labels("torchyard:latest-runtime") is None
    assert fake.sent[0].url == "https://registry-1.docker.io/v2/library/torchyard/manifests/latest-runtime"


# --- authentication ---------------------------------------------------------------------------------------

AUTH = RegistryAuth("ci", "registry-pa55")


def basic_gate(sent: Sent) -> requests.Response | None:
    """htpasswd registry: anything without the right basic credentials is 401 with a Basic challenge."""
    if sent.auth == ("ci", "registry-pa55"):
        return None
    return response(401, {"errors": [{"code": "UNAUTHORIZED"}]}, {"WWW-Authenticate": 'Basic realm="Registry"'})


def test_basic_auth_registry_gets_the_credentials(session: Callable[..., FakeSession]) -> None:
    fake = session(PLAIN, gate=basic_gate)
    assert Registry(AUTH).labels(REF) == LABELS
    assert [s.auth for s in fake.sent] == [("ci", "registry-pa55")] * 2


def test_basic_auth_registry_without_credentials_says_how_to_give_them(session: Callable[..., FakeSession]) -> None:
    session(PLAIN, gate=basic_gate)
    with pytest.raises(PushError) as raised:
        Registry().labels(REF)
    assert str(raised.value) == (
        f"registry {HOST} refused to read team/torch (HTTP 401): "
        f"give credentials with --registry-user / TORCHYARD_REGISTRY_PASSWORD, or docker login {HOST}"
    )
    assert raised.value.exit_code == 5


def test_the_users_docker_login_for_that_registry_is_used(
    session: Callable[..., FakeSession], no_docker_login: Path
) -> None:
    docker_login(no_docker_login, HOST, "ci", "registry-pa55")
    fake = session(PLAIN, gate=basic_gate)
    assert Registry().labels(REF) == LABELS
    assert [s.auth for s in fake.sent] == [("ci", "registry-pa55")] * 2


def test_given_credentials_win_over_docker_login_and_other_hosts_logins_are_not_sent(
    session: Callable[..., FakeSession], no_docker_login: Path
) -> None:
    docker_login(no_docker_login, HOST, "someone", "else")
    fake = session(PLAIN, gate=basic_gate)
    assert Registry(AUTH).labels(REF) == LABELS
    assert {s.auth for s in fake.sent} == {("ci", "registry-pa55")}
    docker_login(no_docker_login, "registry.corp.example", "ci", "registry-pa55")
    with pytest.raises(PushError, match="refused to read team/torch"):
        Registry().labels(REF)


def test_an_unreadable_docker_config_is_no_login(session: Callable[..., FakeSession], no_docker_login: Path) -> None:
    no_docker_login.mkdir()
    (no_docker_login / "config.json").write_text("{not json")
    session(PLAIN, gate=basic_gate)
    with pytest.raises(PushError, match=r"\(HTTP 401\): give credentials"):
        Registry().labels(REF)


def test_wrong_credentials_are_refused_the_same_way(session: Callable[..., FakeSession]) -> None:
    session(PLAIN, gate=basic_gate)
    with pytest.raises(PushError, match=r"refused to read team/torch \(HTTP 401\)"):
        Registry(RegistryAuth("ci", "wrong")).labels(REF)


def test_forbidden_is_refused(session: Callable[..., FakeSession]) -> None:
    session(PLAIN, gate=lambda sent: response(403, {}))
    with pytest.raises(PushError, match=r"refused to read team/torch \(HTTP 403\)"):
        Registry(AUTH).labels(REF)


REALM = "https://auth.corp.example/token"
CHALLENGE = f'Bearer realm="{REALM}",service="registry.corp.example",scope="repository:team/torch:pull"'


def bearer_gate(token_key: str = "token") -> Callable[[Sent], requests.Response | None]:
    def gate(sent: Sent) -> requests.Response | None:
        if sent.url == REALM:
            if sent.auth != ("ci", "registry-pa55"):
                return response(401, {"details": "incorrect username or password"})
            return response(200, {token_key: "tok-123", "expires_in": 300})
        if sent.headers.get("Authorization") == "Bearer tok-123":
            return None
        return response(401, {"errors": [{"code": "UNAUTHORIZED"}]}, {"WWW-Authenticate": CHALLENGE})

    return gate


@pytest.mark.parametrize("token_key", ["token", "access_token"])
def test_bearer_registry_gets_a_token_once(session: Callable[..., FakeSession], token_key: str) -> None:
    fake = session(PLAIN, gate=bearer_gate(token_key))
    assert Registry(AUTH).labels(REF) == LABELS
    assert [s.url for s in fake.sent] == [TAG_URL, REALM, TAG_URL, f"{BASE}/blobs/sha256:c0"]
    token = fake.sent[1]
    assert (token.auth, token.params) == (
        ("ci", "registry-pa55"),
        {"service": "registry.corp.example", "scope": "repository:team/torch:pull"},
    )
    assert fake.sent[2].headers["Authorization"] == "Bearer tok-123"
    assert (fake.sent[3].headers["Authorization"], fake.sent[3].auth) == ("Bearer tok-123", None)


def test_a_token_service_that_refuses_is_named(session: Callable[..., FakeSession]) -> None:
    session(PLAIN, gate=bearer_gate())
    with pytest.raises(PushError) as raised:
        Registry().labels(REF)
    assert str(raised.value) == f"token service {REALM} refused (HTTP 401)"


# --- unreachable, broken ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (requests.ConnectionError("[Errno 111] Connection refused"), "ConnectionError"),
        (requests.exceptions.ReadTimeout("read timed out"), "ReadTimeout"),
        (requests.exceptions.SSLError("CERTIFICATE_VERIFY_FAILED"), "SSLError"),
    ],
)
def test_an_unreachable_registry_is_a_push_error(
    session: Callable[..., FakeSession], error: Exception, name: str
) -> None:
    session(PLAIN, error=error)
    with pytest.raises(PushError) as raised:
        Registry(AUTH).labels(REF)
    assert str(raised.value) == f"registry {HOST} is unreachable: {name}"
    assert raised.value.exit_code == 5


def test_a_server_error_names_the_status_and_url(session: Callable[..., FakeSession]) -> None:
    session(PLAIN, gate=lambda sent: response(500, {}))
    with pytest.raises(PushError) as raised:
        Registry().labels(REF)
    assert str(raised.value) == f"registry {HOST} answered HTTP 500 for {TAG_URL}"


def test_credentials_never_reach_an_error_message(session: Callable[..., FakeSession]) -> None:
    messages = []
    for gate in (basic_gate, bearer_gate(), lambda sent: response(500, {})):
        session(PLAIN, gate=gate)
        with pytest.raises(PushError) as raised:
            Registry(RegistryAuth("ci", "wrong-pa55")).labels(REF)
        messages.append(str(raised.value))
    assert not [m for m in messages if re.search("pa55|ci:", m)]
