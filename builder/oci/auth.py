"""Registry authentication: basic credentials (given to torchyard, or the user's own `docker login`) and
the bearer-token flow of Docker Hub, GHCR and registries with a token service.

A registry answers 401 with `WWW-Authenticate: Bearer realm="...",service="...",scope="..."`; the
client asks the realm for a token for exactly the scopes an operation needs (pull; pull,push; a pull of
the source repository for a cross-repository mount), anonymously or with basic credentials, and
retries with `Authorization: Bearer`. Tokens are kept per host and scope set for their lifetime.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from builder.core.errors import PushError, UpstreamError
from builder.engine import RegistryAuth
from builder.net.http import Http
from builder.oci.refs import DOCKER_HUB

_PARAM = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Challenge:
    scheme: str  # "bearer" or "basic"
    params: dict[str, str]


def parse_challenge(header: str | None) -> Challenge | None:
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    return Challenge(scheme.lower(), dict(_PARAM.findall(rest)))


def docker_login(host: str) -> RegistryAuth | None:
    """The user's `docker login` for host, as the docker CLI would find it ($DOCKER_CONFIG, credential
    helpers); None when there is none or it cannot be read (the registry then says what it refuses)."""
    from docker import auth as docker_auth  # the docker SDK only where a login is looked up
    from docker.errors import DockerException

    try:
        config = docker_auth.load_config()
        found = docker_auth.resolve_authconfig(config, None if host == DOCKER_HUB else host)
    except (DockerException, OSError, ValueError):
        return None
    found = {key.lower(): value for key, value in (found or {}).items()}  # config file: lower, helpers: Title
    if not found.get("username") or found.get("password") is None:
        return None  # identity tokens (docker login with OAuth) are not basic credentials
    return RegistryAuth(str(found["username"]), str(found["password"]))


class Authenticator:
    """Credentials per host and bearer tokens per (host, scopes), shared by the threads of one client."""

    def __init__(self, http: Http, auth: RegistryAuth | None, *, use_docker_login: bool = True) -> None:
        self._http = http
        self._auth = auth
        self._use_docker_login = use_docker_login
        self._logins: dict[str, RegistryAuth | None] = {}
        self._tokens: dict[tuple[str, tuple[str, ...]], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def credentials(self, host: str) -> tuple[str, str] | None:
        with self._lock:
            if self._auth is None and host not in self._logins:
                self._logins[host] = docker_login(host) if self._use_docker_login else None
            found = self._auth or self._logins.get(host)
        return None if found is None else (found.username, found.password)

    def headers(self, host: str, scopes: tuple[str, ...]) -> dict[str, str]:
        """Authorization for a request, from what earlier challenges taught (nothing on first contact)."""
        with self._lock:
            token = self._tokens.get((host, scopes))
        if token is not None and token[1] > time.monotonic():
            return {"Authorization": f"Bearer {token[0]}"}
        return {}

    def basic(self, host: str, headers: dict[str, str]) -> tuple[str, str] | None:
        """Basic credentials go along when no token does (htpasswd registries, the first contact)."""
        return None if "Authorization" in headers else self.credentials(host)

    def answer(self, host: str, scopes: tuple[str, ...], challenge: Challenge | None) -> bool:
        """Act on a 401: fetch a token for a Bearer challenge. False when nothing more can be tried."""
        if challenge is None or challenge.scheme != "bearer":
            return False
        token, lifetime = self._fetch(host, scopes, challenge)
        with self._lock:
            self._tokens[host, scopes] = (token, time.monotonic() + max(lifetime - 10.0, 1.0))
        return True

    def _fetch(self, host: str, scopes: tuple[str, ...], challenge: Challenge) -> tuple[str, float]:
        realm = challenge.params.get("realm")
        if not realm:  # else requests would be asked for "" and the user told of a MissingSchema
            raise PushError(f"registry {host} asked for a token without naming a token service (no realm)")
        params: dict[str, str | list[str]] = {}
        if "service" in challenge.params:
            params["service"] = challenge.params["service"]
        wanted = list(scopes) or ([challenge.params["scope"]] if "scope" in challenge.params else [])
        if wanted:
            params["scope"] = wanted if len(wanted) > 1 else wanted[0]
        try:
            reply = self._http.get(realm, params=params, auth=self.credentials(host))
        except UpstreamError as exc:
            reason = getattr(exc, "reason", str(exc))
            raise PushError(f"token service {realm} is unreachable: {reason}") from None
        if not reply.ok:
            raise PushError(f"token service {realm} refused (HTTP {reply.status})")
        try:
            body = reply.json()
            token = str(body.get("token") or body.get("access_token") or "")
            lifetime = float(body.get("expires_in") or 60)
        except (ValueError, AttributeError):
            raise PushError(f"token service {realm} answered something that is not a token") from None
        if not token:
            raise PushError(f"token service {realm} answered without a token")
        return token, lifetime
