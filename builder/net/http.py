"""One HTTP client for everything torchyard asks upstream (package indexes, container registries).

Retries with exponential backoff on 429/5xx and on dropped connections (honouring Retry-After), a
timeout per request, a request budget per client, counters of requests and bytes, bounded
parallelism (one requests.Session per thread: a Session is not thread-safe), and an optional
on-disk cache (builder.net.cache) so that a rerun costs nothing.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:  # imported when a request is made: most commands never make one (requests costs ~0.15 s)
    import requests

from builder.core.errors import UpstreamError
from builder.net.cache import CacheKind, DiskCache, Stored

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class Policy:
    timeout: float = 20.0  # seconds, per request (connect and each read)
    retries: int = 4  # further attempts after the first, on 429/5xx (the server is there, and busy)
    connect_retries: int = 1  # further attempts on a failed connection or a timeout (rarely transient)
    backoff: float = 0.5  # first delay; doubles per attempt
    max_delay: float = 30.0  # no single wait is longer (a Retry-After too)
    budget: int | None = None  # network requests this client may send (None: unlimited)
    workers: int = 8  # parallel requests at most (Http.map)


class Unreachable(UpstreamError):
    """No usable answer from a host after every retry: connection failures or timeouts."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host} is unreachable: {reason}")
        self.host = host
        self.reason = reason


class BudgetSpent(UpstreamError):
    pass


class TooLarge(UpstreamError):
    pass


@dataclass(frozen=True)
class Reply:
    """An HTTP answer, fresh or from the cache. Header names are lower case."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str  # where the answer came from, after redirects
    cached: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self) -> Any:
        import json

        return json.loads(self.body)


@dataclass
class Counters:
    """What a client cost: network requests, bytes received, retries, answers served from the cache."""

    requests: int = 0
    bytes: int = 0
    retries: int = 0
    cache_hits: int = 0
    by_host: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sent(self, host: str) -> int:
        with self._lock:
            self.requests += 1
            self.by_host[host] = self.by_host.get(host, 0) + 1
            return self.requests

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "bytes": self.bytes,
            "retries": self.retries,
            "cache_hits": self.cache_hits,
            "by_host": dict(sorted(self.by_host.items())),
        }


class Http:
    def __init__(
        self,
        policy: Policy | None = None,
        *,
        cache: DiskCache | None = None,
        session_factory: Callable[[], requests.Session] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        verify: str | bool = True,
    ) -> None:
        self.policy = policy or Policy()
        self.cache = cache
        self.counters = Counters()
        self._session_factory = session_factory or _requests().Session
        self._sleep = sleep
        self._verify = verify
        self._local = threading.local()
        self._dead: dict[str, str] = {}  # host -> why: once unreachable, not asked again by this client
        self._failures: dict[str, int] = {}  # host -> failed connections, all requests (threads) together
        self._failures_lock = threading.Lock()

    # --- requests -----------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
        auth: tuple[str, str] | None = None,
        params: Mapping[str, str | list[str]] | None = None,
        cache: CacheKind | None = None,
        allow_redirects: bool = True,
        limit: int | None = None,
        once: bool = False,
    ) -> Reply:
        """One request, retried on 429/5xx and dropped connections. A 4xx (and a 5xx that outlasts the
        retries) comes back as a Reply; Unreachable when no answer came at all. With `limit`, a body
        longer than that many bytes is not read to its end: TooLarge (a server that ignores Range).
        With `once`, a single attempt whose dropped connection is the caller's to handle (a chunk of a
        resumable upload: sending it again as it was could only be refused) and does not count against
        the host."""
        headers = dict(headers or {})
        key = self._cache_key(method, url, headers, params) if cache is not None and self.cache else None
        if key is not None and self.cache is not None and cache is not None:
            stored = self.cache.get(key, cache)
            if stored is not None:
                self.counters.add(cache_hits=1)
                return Reply(stored.status, stored.headers, stored.body, stored.url, cached=True)
        reply = self._send(method, url, headers, data, auth, params, allow_redirects, limit, once)
        if key is not None and self.cache is not None and reply.status in (200, 206, 404):
            self.cache.put(key, Stored(reply.status, dict(reply.headers), reply.body, reply.url))
        return reply

    def get(self, url: str, **kwargs: Any) -> Reply:
        return self.request("GET", url, **kwargs)

    @contextmanager
    def stream(
        self, method: str, url: str, *, headers: Mapping[str, str] | None = None, auth: tuple[str, str] | None = None
    ) -> Iterator[requests.Response]:
        """A streamed answer (large blobs): retried while connecting, never cached, closed after use. A
        connection lost while the caller reads the body is Unreachable too (requests' own errors stay here)."""
        response = self._attempts(method, url, dict(headers or {}), None, auth, None, True, stream=True)
        try:
            yield response
        except _requests().RequestException as exc:
            raise Unreachable(urlsplit(url).netloc, _reason(exc)) from None
        finally:
            response.close()

    def map(self, function: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """function over items with at most policy.workers requests in flight; results in order.

        Items run one by one while they are answered from the cache (threads only cost time then), and
        in parallel from the first one that goes to the network."""
        listed = list(items)
        results: list[R] = []
        for at, item in enumerate(listed):
            sent = self.counters.requests
            results.append(function(item))
            rest = listed[at + 1 :]
            if self.counters.requests != sent and len(rest) > 1 and self.policy.workers > 1:
                with ThreadPoolExecutor(max_workers=self.policy.workers) as pool:
                    return results + list(pool.map(function, rest))
        return results

    @staticmethod
    def chunks(response: requests.Response, size: int) -> Iterator[bytes]:
        """A streamed body in reads of `size` bytes; a connection lost in the middle is Unreachable."""
        try:
            yield from response.iter_content(size)
        except _requests().RequestException as exc:
            raise Unreachable(urlsplit(response.url or "").netloc, _reason(exc)) from None

    def pause(self, seconds: float) -> None:
        """Wait as this client waits between retries (a test's client records the wait instead)."""
        self._sleep(seconds)

    # --- internals ----------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        data: bytes | None,
        auth: tuple[str, str] | None,
        params: Mapping[str, str | list[str]] | None,
        allow_redirects: bool,
        limit: int | None = None,
        once: bool = False,
    ) -> Reply:
        stream = limit is not None
        response = self._attempts(method, url, headers, data, auth, params, allow_redirects, stream=stream, once=once)
        body = response.content if limit is None else _read_at_most(response, limit, url)
        self.counters.add(bytes=len(body))
        lowered = {name.lower(): value for name, value in response.headers.items()}
        return Reply(response.status_code, lowered, body, response.url or url)

    def _attempts(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        data: Any,
        auth: tuple[str, str] | None,
        params: Mapping[str, str | list[str]] | None,
        allow_redirects: bool,
        *,
        stream: bool = False,
        once: bool = False,
    ) -> requests.Response:
        requests = _requests()
        host = urlsplit(url).netloc
        retries = 0 if once else self.policy.retries
        for attempt in range(retries + 1):
            if host in self._dead:  # another request (maybe in another thread) gave up on this host
                raise Unreachable(host, self._dead[host])
            last = attempt == retries
            self._spend(host)
            if hasattr(data, "seek"):  # a file body is sent again from its start
                data.seek(0)
            try:
                response = self._session().request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    auth=auth,
                    params=params,
                    timeout=self.policy.timeout,
                    allow_redirects=allow_redirects,
                    verify=self._verify,
                    stream=stream,
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                if once:
                    raise Unreachable(host, _reason(exc)) from None
                if last or self._failed(host) > self.policy.connect_retries:
                    self._dead[host] = _reason(exc)
                    raise Unreachable(host, _reason(exc)) from None
                self._wait(attempt, None)
                continue
            except requests.RequestException as exc:  # invalid URL, too many redirects: no retry helps
                raise Unreachable(host, _reason(exc)) from None
            if response.history:  # redirects followed by requests: each one was a request too
                self.counters.add(requests=len(response.history))
            if response.status_code in RETRY_STATUSES and not last:
                retry_after = response.headers.get("Retry-After")
                response.close()
                self._wait(attempt, retry_after)
                continue
            return response
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def _failed(self, host: str) -> int:
        """Count a failed connection to `host`; the retries for failed connections are per host, not per
        request, so that parallel requests to a host that is down give up together."""
        with self._failures_lock:
            self._failures[host] = self._failures.get(host, 0) + 1
            return self._failures[host]

    def _spend(self, host: str) -> None:
        count = self.counters.sent(host)
        if self.policy.budget is not None and count > self.policy.budget:
            raise BudgetSpent(f"request budget spent: {self.policy.budget} requests (raise it with --max-requests)")

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        self.counters.add(retries=1)
        delay = _retry_after(retry_after)
        if delay is None:
            delay = self.policy.backoff * (2**attempt)
        self._sleep(min(delay, self.policy.max_delay))

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self._session_factory()
        return session

    @staticmethod
    def _cache_key(
        method: str, url: str, headers: Mapping[str, str], params: Mapping[str, str | list[str]] | None
    ) -> str:
        wanted = {k.lower(): v for k, v in headers.items() if k.lower() in ("accept", "range")}
        return repr((method, url, sorted(wanted.items()), sorted((params or {}).items())))


def _requests() -> Any:
    import requests

    return requests


def _read_at_most(response: requests.Response, limit: int, url: str) -> bytes:
    requests = _requests()
    chunks, size = [], 0
    try:
        for chunk in response.iter_content(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"{url}: the answer is longer than the {limit} bytes asked for")
    except requests.RequestException as exc:
        raise Unreachable(urlsplit(url).netloc, _reason(exc)) from None
    finally:
        response.close()
    return b"".join(chunks)


def _reason(exc: Exception) -> str:
    return type(exc).__name__


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (a number or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
