"""A small Docker Registry HTTP API v2 reader: what labels does the image under a tag carry?

Used to skip builds and pushes whose content hash is already in the registry. Talks plain HTTP to
loopback registries (as the engine does: 127.0.0.0/8 is trusted as insecure) and HTTPS elsewhere;
basic and bearer-token authentication, with the credentials given to torchyard or else the user's own
`docker login` for that registry (read from the docker config or its credential helper, never written).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import requests
from docker import auth as docker_auth
from docker.errors import DockerException

from builder.engine import RegistryAuth, split_ref
from builder.errors import PushError

_MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
_LOOPBACK = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$")
TIMEOUT = 30
DOCKER_HUB = "registry-1.docker.io"


@dataclass(frozen=True)
class RepoRef:
    host: str
    name: str

    @property
    def base(self) -> str:
        scheme = "http" if _LOOPBACK.match(self.host) else "https"
        return f"{scheme}://{self.host}/v2/{self.name}"


def parse_repo(repo: str) -> RepoRef:
    """'127.0.0.1:5000/team/img' -> host + name; a repo without a registry host is Docker Hub."""
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return RepoRef(first, rest)
    name = repo if "/" in repo else f"library/{repo}"
    return RepoRef(DOCKER_HUB, name)


class Registry:
    def __init__(self, auth: RegistryAuth | None = None) -> None:
        self._auth = auth
        self._session = requests.Session()
        self._tokens: dict[str, str] = {}
        self._logins: dict[str, RegistryAuth | None] = {}

    def labels(self, ref: str) -> dict[str, str] | None:
        """Labels of the linux/amd64 image under repo:tag, or None when the tag does not exist."""
        repo, tag = split_ref(ref)
        where = parse_repo(repo)
        manifest = self._get_json(where, f"{where.base}/manifests/{tag}", _MANIFEST_TYPES)
        if manifest is None:
            return None
        if manifest.get("mediaType") in _INDEX_TYPES or "manifests" in manifest:
            digest = _amd64(manifest)
            manifest = self._get_json(where, f"{where.base}/manifests/{digest}", _MANIFEST_TYPES) or {}
        config_digest = (manifest.get("config") or {}).get("digest")
        if not config_digest:
            return None
        config = self._get_json(where, f"{where.base}/blobs/{config_digest}", "application/json") or {}
        return dict((config.get("config") or {}).get("Labels") or {})

    def _get_json(self, where: RepoRef, url: str, accept: str) -> dict[str, Any] | None:
        response = self._request(where, url, accept)
        if response.status_code == 404:
            return None
        if response.status_code in (401, 403):
            raise PushError(
                f"registry {where.host} refused to read {where.name} (HTTP {response.status_code}): "
                f"give credentials with --registry-user / TORCHYARD_REGISTRY_PASSWORD, or docker login {where.host}"
            )
        if not response.ok:
            raise PushError(f"registry {where.host} answered HTTP {response.status_code} for {url}")
        data: dict[str, Any] = response.json()
        return data

    def _request(self, where: RepoRef, url: str, accept: str) -> requests.Response:
        headers = {"Accept": accept}
        if where.host in self._tokens:
            headers["Authorization"] = f"Bearer {self._tokens[where.host]}"
        try:
            response = self._session.get(url, headers=headers, timeout=TIMEOUT, auth=self._basic(where, headers))
            if response.status_code == 401 and "Bearer" in response.headers.get("WWW-Authenticate", ""):
                self._tokens[where.host] = self._token(where, response.headers["WWW-Authenticate"])
                headers["Authorization"] = f"Bearer {self._tokens[where.host]}"
                response = self._session.get(url, headers=headers, timeout=TIMEOUT)
        except requests.RequestException as exc:
            raise PushError(f"registry {where.host} is unreachable: {type(exc).__name__}") from None
        return response

    def _credentials(self, where: RepoRef) -> tuple[str, str] | None:
        if self._auth is None and where.host not in self._logins:
            self._logins[where.host] = docker_login(where.host)
        found = self._auth or self._logins[where.host]
        return None if found is None else (found.username, found.password)

    def _basic(self, where: RepoRef, headers: dict[str, str]) -> tuple[str, str] | None:
        return None if "Authorization" in headers else self._credentials(where)

    def _token(self, where: RepoRef, challenge: str) -> str:
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", "")
        auth = self._credentials(where)
        try:
            response = self._session.get(realm, params=params, auth=auth, timeout=TIMEOUT)
        except requests.RequestException as exc:
            raise PushError(f"token service {realm} is unreachable: {type(exc).__name__}") from None
        if not response.ok:
            raise PushError(f"token service {realm} refused (HTTP {response.status_code})")
        body = response.json()
        return str(body.get("token") or body.get("access_token") or "")


def docker_login(host: str) -> RegistryAuth | None:
    """The user's `docker login` for host, as the docker CLI would find it ($DOCKER_CONFIG, credential
    helpers); None when there is none or it cannot be read (the registry then says what it refuses)."""
    try:
        config = docker_auth.load_config()
        found = docker_auth.resolve_authconfig(config, None if host == DOCKER_HUB else host)
    except (DockerException, OSError, ValueError):
        return None
    found = {key.lower(): value for key, value in (found or {}).items()}  # config file: lower, helpers: Title
    if not found.get("username") or found.get("password") is None:
        return None  # identity tokens (docker login with OAuth) are not basic credentials
    return RegistryAuth(str(found["username"]), str(found["password"]))


def _amd64(index: dict[str, Any]) -> str:
    for entry in index.get("manifests", []):
        platform = entry.get("platform") or {}
        if platform.get("os") == "linux" and platform.get("architecture") == "amd64":
            return str(entry["digest"])
    raise PushError("the registry holds no linux/amd64 image under this tag")
