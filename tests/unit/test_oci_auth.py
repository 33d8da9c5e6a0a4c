"""builder.oci.auth on its own (issue 24: mutation testing left the token service's answers unheld by the
registry tests): challenges read, the token asked for with exactly the scopes wanted, each way the token service
can fail named in one line, a token's lifetime, and whose credentials go along."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import requests
from http_kit import Answer, Net, json_answer

from builder.core.errors import PushError
from builder.engine import RegistryAuth
from builder.net.http import Policy
from builder.oci.auth import Authenticator, Challenge, docker_login, parse_challenge
from builder.oci.refs import DOCKER_HUB

HOST = "registry.corp.example"
REALM = "https://auth.corp.example/token"
AUTH = RegistryAuth("ci", "pa55")


@pytest.fixture(autouse=True)
def no_docker_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))


def bearer(**params: str) -> Challenge:
    return Challenge("bearer", {"realm": REALM, **params})


def authenticator(net: Net, auth: RegistryAuth | None = AUTH) -> Authenticator:
    return Authenticator(net.http(Policy(retries=0, connect_retries=0, workers=1)), auth, use_docker_login=False)


def test_a_challenge_is_read_with_its_scheme_in_lower_case() -> None:
    assert parse_challenge(None) is None
    assert parse_challenge("") is None
    assert parse_challenge(f'  Bearer realm="{REALM}",service="{HOST}"') == Challenge(
        "bearer", {"realm": REALM, "service": HOST}
    )
    assert parse_challenge('Basic realm="Registry"') == Challenge("basic", {"realm": "Registry"})


def test_only_a_bearer_challenge_is_answered() -> None:
    net = Net()
    auth = authenticator(net)
    assert auth.answer(HOST, ("repository:a:pull",), None) is False
    assert auth.answer(HOST, ("repository:a:pull",), Challenge("basic", {"realm": "R"})) is False
    assert net.sent == []


def test_the_token_is_asked_for_the_scopes_wanted_with_the_service_and_the_host_s_credentials() -> None:
    net = Net().on(lambda sent: json_answer({"token": "t"}))
    auth = authenticator(net)
    scopes = ("repository:a:pull,push", "repository:b:pull")
    assert auth.answer(HOST, scopes, bearer(service=HOST, scope="repository:x:pull")) is True
    assert net.sent[0].query == {"service": [HOST], "scope": list(scopes)}
    assert net.sent[0].basic == "Y2k6cGE1NQ=="
    assert auth.headers(HOST, scopes) == {"Authorization": "Bearer t"}
    assert auth.headers(HOST, scopes[:1]) == {}
    assert auth.headers("other.example", scopes) == {}


def test_without_scopes_of_its_own_the_challenge_s_scope_is_asked_for_and_no_service_when_none_is_named() -> None:
    net = Net().on(lambda sent: json_answer({"access_token": "t"}))
    auth = authenticator(net, None)
    assert auth.answer(HOST, (), bearer(scope="repository:x:pull")) is True
    assert net.sent[0].query == {"scope": ["repository:x:pull"]}
    assert net.sent[0].basic is None
    assert auth.answer(HOST, (), bearer()) is True
    assert net.sent[1].query == {}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (Answer(500, b"{}"), "refused (HTTP 500)"),
        (Answer(200, b"<html>login</html>"), "answered something that is not a token"),
        (json_answer(["token"]), "answered something that is not a token"),
        (json_answer({"token": "t", "expires_in": "soon"}), "answered something that is not a token"),
        (json_answer({"token": ""}), "answered without a token"),
        (json_answer({"expires_in": 300}), "answered without a token"),
        (requests.ConnectionError("refused"), "is unreachable: ConnectionError"),
    ],
)
def test_each_way_the_token_service_fails_is_one_line(answer: Answer | Exception, problem: str) -> None:
    net = Net().on(lambda sent: answer)
    with pytest.raises(PushError) as raised:
        authenticator(net).answer(HOST, ("repository:a:pull",), bearer())
    assert str(raised.value) == f"token service {REALM} {problem}"
    assert raised.value.exit_code == 5


def _clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


@pytest.mark.parametrize(("body", "valid_for"), [({"expires_in": 300}, 290.0), ({}, 50.0), ({"expires_in": 5}, 1.0)])
def test_a_token_is_used_until_ten_seconds_before_it_expires_and_at_least_a_second(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, int], valid_for: float
) -> None:
    now = _clock(monkeypatch)
    net = Net().on(lambda sent: json_answer({"token": "t", **body}))
    auth = authenticator(net)
    auth.answer(HOST, ("s",), bearer())
    now[0] += valid_for - 0.5
    assert auth.headers(HOST, ("s",)) == {"Authorization": "Bearer t"}
    now[0] += 0.5
    assert auth.headers(HOST, ("s",)) == {}


def test_basic_credentials_go_only_where_no_token_does_and_given_ones_win() -> None:
    auth = authenticator(Net())
    assert auth.basic(HOST, {}) == ("ci", "pa55")
    assert auth.basic(HOST, {"Authorization": "Bearer t"}) is None
    assert authenticator(Net(), None).credentials(HOST) is None


def test_the_docker_login_is_looked_up_once_per_host(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []

    def login(host: str) -> RegistryAuth | None:
        looked.append(host)
        return RegistryAuth("me", "pw") if host == HOST else None

    monkeypatch.setattr("builder.oci.auth.docker_login", login)
    auth = Authenticator(Net().http(), None)
    assert [auth.credentials(h) for h in (HOST, HOST, "other.example")] == [("me", "pw"), ("me", "pw"), None]
    assert looked == [HOST, "other.example"]
    assert Authenticator(Net().http(), None, use_docker_login=False).credentials(HOST) is None
    assert looked == [HOST, "other.example"]
    assert Authenticator(Net().http(), AUTH).credentials(HOST) == ("ci", "pa55")
    assert looked == [HOST, "other.example"]


def test_a_challenge_whose_values_or_separators_hold_spaces_keeps_its_scheme() -> None:
    assert parse_challenge('Basic realm="Docker Registry"') == Challenge("basic", {"realm": "Docker Registry"})
    assert parse_challenge(f'Bearer realm="{REALM}", service="{HOST}"') == Challenge(
        "bearer", {"realm": REALM, "service": HOST}
    )


def test_the_token_is_asked_for_with_the_docker_login_of_the_registry_that_challenged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("builder.oci.auth.docker_login", lambda host: AUTH if host == HOST else None)
    net = Net().on(lambda sent: json_answer({"token": "t"}))
    auth = Authenticator(net.http(Policy(retries=0, connect_retries=0, workers=1)), None)
    assert auth.answer(HOST, ("s",), bearer()) is True
    assert net.sent[0].basic == "Y2k6cGE1NQ=="
    assert auth.answer("other.example", ("s",), bearer()) is True
    assert net.sent[1].basic is None


def test_a_bearer_challenge_without_a_realm_is_one_line_naming_the_registry() -> None:
    net = Net().on(lambda sent: json_answer({"token": "t"}))
    with pytest.raises(PushError) as raised:
        authenticator(net).answer(HOST, ("s",), Challenge("bearer", {"service": HOST}))
    assert str(raised.value) == f"registry {HOST} asked for a token without naming a token service (no realm)"
    assert net.sent == []


def test_a_spent_request_budget_stops_the_token_request_with_its_own_words() -> None:
    net = Net().on(lambda sent: json_answer({"token": "t"}))
    spent = Authenticator(net.http(Policy(retries=0, connect_retries=0, workers=1, budget=0)), AUTH)
    with pytest.raises(PushError) as raised:
        spent.answer(HOST, ("s",), bearer())
    assert str(raised.value) == (
        f"token service {REALM} is unreachable: request budget spent: 0 requests (raise it with --max-requests)"
    )


def test_a_docker_hub_login_is_found_under_the_index_docker_cli_writes(tmp_path: Path) -> None:
    """`docker login` (no host) stores Docker Hub's credentials under https://index.docker.io/v1/; the registry
    host torchyard talks to is registry-1.docker.io. A login for another host is looked up by that host."""
    (tmp_path / "docker-config").mkdir()
    auths = {
        "https://index.docker.io/v1/": {"auth": "aHViOmh1YnB3"},  # hub:hubpw
        HOST: {"auth": "Y2k6cGE1NQ=="},  # ci:pa55
    }
    (tmp_path / "docker-config" / "config.json").write_text(json.dumps({"auths": auths}))
    assert docker_login(DOCKER_HUB) == RegistryAuth("hub", "hubpw")
    assert docker_login(HOST) == AUTH
    assert docker_login("other.example") is None


def test_a_login_whose_credential_helper_gives_no_secret_is_no_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential helper (credsStore) that knows the user but gives no secret: no basic credentials, as for an
    identity token; the registry then says what it refuses."""
    helper = tmp_path / "bin" / "docker-credential-blank"
    helper.parent.mkdir()
    helper.write_text('#!/bin/sh\necho \'{"ServerURL": "x", "Username": "me", "Secret": null}\'\n')
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "docker-config").mkdir()
    (tmp_path / "docker-config" / "config.json").write_text(json.dumps({"credsStore": "blank"}))
    assert docker_login(HOST) is None
