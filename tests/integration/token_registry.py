"""A bearer-token registry for the tests: a small proxy in front of the local registry (127.0.0.1:5000)
that behaves like Docker Hub and GHCR do towards clients.

Every /v2/ request needs `Authorization: Bearer <token>` whose grants cover it: pull for GET/HEAD, push
for POST/PUT/PATCH/DELETE, and pull of the `from` repository for a cross-repository mount; otherwise the
answer is 401 with `WWW-Authenticate: Bearer realm=".../token",service="torchyard-test",scope="..."`.
The realm issues tokens anonymously for pull scopes only and with the basic credentials USER/PASSWORD for
pull,push; it records every scope it was asked for, so a test can check what a client requested.
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import requests

UPSTREAM = "127.0.0.1:5000"
USER, PASSWORD = "robot", "token-pa55"
SERVICE = "torchyard-test"


@dataclass
class TokenRealm:
    host: str = ""
    grants: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # token -> {(repo, action)}
    asked: list[list[str]] = field(default_factory=list)  # the scope lists of each token request
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def issue(self, scopes: list[str], basic: str | None) -> str | None:
        allowed = basic == base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if basic is not None and not allowed:
            return None
        granted: set[tuple[str, str]] = set()
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            for action in actions.split(","):
                if kind == "repository" and (action == "pull" or allowed):
                    granted.add((name, action))
        token = secrets.token_hex(8)
        with self.lock:
            self.asked.append(scopes)
            self.grants[token] = granted
        return token

    def allows(self, token: str | None, needed: set[tuple[str, str]]) -> bool:
        with self.lock:
            return token is not None and needed <= self.grants.get(token, set())


def _needed(method: str, path: str, query: dict[str, list[str]]) -> tuple[str, set[tuple[str, str]]]:
    """The repository a /v2/ path names and the grants the request needs."""
    parts = path[len("/v2/") :].split("/")
    marker = next((i for i, p in enumerate(parts) if p in ("manifests", "blobs", "tags")), len(parts))
    name = "/".join(parts[:marker])
    action = "pull" if method in ("GET", "HEAD") else "push"
    needed = {(name, "pull"), (name, action)}
    if "from" in query:
        needed.add((query["from"][0], "pull"))
    return name, needed


def _handler(realm: TokenRealm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _token(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            auth = self.headers.get("Authorization", "")
            basic = auth[6:] if auth.startswith("Basic ") else None
            token = realm.issue(query.get("scope", []), basic)
            if token is None:
                realm.refused += 1
                self._send(401, b'{"details":"incorrect username or password"}', {})
                return
            self._send(200, b'{"token":"%s","expires_in":300}' % token.encode(), {"Content-Type": "application/json"})

        def _proxy(self) -> None:
            split = urlsplit(self.path)
            query = parse_qs(split.query)
            body = self._body()
            if split.path in ("/v2/", "/v2"):
                needed: set[tuple[str, str]] = set()
                name = ""
            else:
                name, needed = _needed(self.command, split.path, query)
            auth = self.headers.get("Authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else None
            if not realm.allows(token, needed) or (not needed and token is None):
                actions = "pull" if self.command in ("GET", "HEAD") else "pull,push"
                challenge = f'Bearer realm="http://{realm.host}/token",service="{SERVICE}"'
                if name:
                    challenge += f',scope="repository:{name}:{actions}"'
                self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge})
                return
            forwarded = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization")}
            forwarded.pop("Transfer-Encoding", None)
            upstream = requests.request(
                self.command,
                f"http://{UPSTREAM}{self.path}",
                headers=forwarded,
                data=body or None,
                allow_redirects=False,
                timeout=60,
            )
            headers = {
                k: v.replace(f"http://{UPSTREAM}/", f"http://{realm.host}/")
                for k, v in upstream.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding")
            }
            self._send(upstream.status_code, upstream.content, headers)

        def do_GET(self) -> None:
            if self.path.startswith("/token"):
                self._token()
            else:
                self._proxy()

        do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _proxy

    return Handler


@contextmanager
def token_registry() -> Iterator[TokenRealm]:
    realm = TokenRealm()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(realm))
    realm.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield realm
    finally:
        server.shutdown()
        server.server_close()
