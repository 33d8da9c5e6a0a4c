"""A fake network at requests' transport seam: a requests adapter that answers from Python handlers.

requests itself runs for real above it (redirects, Authorization stripped on a host change, params,
Range headers), so the unit tests exercise the same client code as the network does; nothing listens
on a socket. `Net.http()` gives a builder.net.http.Http whose sessions use the fake; waits are recorded,
not slept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
import urllib3
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict

from builder.net.cache import DiskCache
from builder.net.http import Http, Policy


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.url).query)

    @property
    def basic(self) -> str | None:
        value = self.headers.get("Authorization", "")
        return value[6:] if value.startswith("Basic ") else None

    @property
    def bearer(self) -> str | None:
        value = self.headers.get("Authorization", "")
        return value[7:] if value.startswith("Bearer ") else None


@dataclass
class Answer:
    status: int = 200
    body: bytes | str | dict[str, Any] | list[Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None  # the connection drops after this many bytes of the body (streamed reads)

    def content(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


Handler = Callable[[Sent], Answer | Exception | None]
_Session = requests.Session  # as imported: a test may monkeypatch requests.Session with Net.session


class FakeAdapter(BaseAdapter):
    def __init__(self, net: Net) -> None:
        super().__init__()
        self.net = net

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        sent = Sent(
            str(request.method), str(request.url), dict(request.headers), body if isinstance(body, bytes) else b""
        )
        if isinstance(request.body, str):
            sent.body = request.body.encode()
        self.net.sent.append(sent)
        self.net.timeouts.append(kwargs.get("timeout"))
        self.net.options.append({k: kwargs.get(k) for k in ("verify", "stream")})
        answer = self.net.answer(sent)
        if isinstance(answer, Exception):
            raise answer
        response = requests.Response()
        response.status_code = answer.status
        content = answer.content()
        response._content = b"" if sent.method == "HEAD" else content
        response.headers = CaseInsensitiveDict(answer.headers)
        response.url = sent.url
        response.request = request
        response.reason = "fake"
        response.raw = _Raw(response._content, answer.cut_after)
        return response

    def close(self) -> None:
        pass


class _Raw:
    """Enough of urllib3's response for requests' streaming (iter_content) and redirect handling."""

    def __init__(self, data: bytes, cut_after: int | None = None) -> None:
        self._data = data
        self._cut_after = cut_after

    def read(self, amount: int | None = None, decode_content: bool = True) -> bytes:
        data, self._data = self._data, b""
        return data

    def stream(self, amount: int = 65536, decode_content: bool = True) -> Any:
        if self._cut_after is not None:
            yield self._data[: self._cut_after]
            raise urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead")
        while self._data:
            chunk, self._data = self._data[:amount], self._data[amount:]
            yield chunk

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class Net:
    """Handlers tried in order; the first that answers wins. Unmatched requests get 404."""

    handlers: list[Handler] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    timeouts: list[Any] = field(default_factory=list)
    options: list[dict[str, Any]] = field(default_factory=list)  # verify and stream, as each request had them
    waits: list[float] = field(default_factory=list)

    def on(self, handler: Handler) -> Net:
        self.handlers.append(handler)
        return self

    def route(self, method: str, url: str, *answers: Answer | Exception) -> Net:
        """Answer `method url` (query ignored) with the answers in turn; the last one repeats."""
        queue = list(answers)

        def handler(sent: Sent) -> Answer | Exception | None:
            if sent.method != method or sent.url.split("?")[0] != url:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]

        return self.on(handler)

    def answer(self, sent: Sent) -> Answer | Exception:
        for handler in self.handlers:
            found = handler(sent)
            if found is not None:
                return found
        return Answer(404, {"errors": [{"code": "NOT_FOUND"}]})

    def session(self) -> requests.Session:
        session = _Session()
        session.trust_env = False  # no proxies, no netrc from the host
        adapter = FakeAdapter(self)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def http(self, policy: Policy | None = None, cache: DiskCache | None = None) -> Http:
        return Http(policy or Policy(workers=1), cache=cache, session_factory=self.session, sleep=self.waits.append)

    def urls(self, method: str | None = None) -> list[str]:
        return [s.url for s in self.sent if method is None or s.method == method]


def json_answer(body: Any, headers: Mapping[str, str] | None = None, status: int = 200) -> Answer:
    return Answer(status, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})})
