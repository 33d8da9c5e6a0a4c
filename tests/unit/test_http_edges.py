"""builder.net.http and builder.net.cache at their edges (issue 24: mutation testing left these unheld): Retry-After
as a date, bodies read up to a limit, what each request carries, errors no retry helps, the last attempt, when
Http.map goes parallel, the counters, and what the cache keeps, serves and refuses."""

from __future__ import annotations

import email.utils
import hashlib
import json
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from http_kit import Answer, Net, Sent

from builder.net.cache import CacheKind, DiskCache, Stored
from builder.net.http import Http, Policy, Reply, TooLarge, Unreachable

URL = "https://pypi.example/simple/torch/"
REALM = "https://auth.example/token"


def test_retry_after_as_a_date_a_past_date_spaces_and_unreadable_values(monkeypatch: pytest.MonkeyPatch) -> None:
    now = 1_700_000_000.0
    monkeypatch.setattr(time, "time", lambda: now)
    later = email.utils.formatdate(now + 12, usegmt=True)
    earlier = email.utils.formatdate(now - 60, usegmt=True)
    busy = [Answer(503, b"", {"Retry-After": value}) for value in (later, earlier, "soon", " 3 ", "")]
    net = Net().route("GET", URL, *busy, Answer(200, b"ok"))
    http = net.http(Policy(retries=5, backoff=0.5, workers=1))
    assert http.get(URL).body == b"ok"
    assert net.waits == [12.0, 0.0, 2.0, 3.0, 8.0]  # unreadable or empty: the backoff of that attempt
    assert http.counters.retries == 5


def test_a_limited_read_returns_a_body_of_exactly_the_limit_in_all_its_chunks() -> None:
    body = bytes(range(256)) * 800  # 204800 bytes: several of requests' chunks
    net = Net().route("GET", URL, Answer(200, body))
    http = net.http()
    assert http.get(URL, limit=len(body)).body == body
    assert http.counters.bytes == len(body)
    assert net.options[-1]["stream"] is True


def test_a_body_one_byte_past_the_limit_is_too_large() -> None:
    net = Net().route("GET", URL, Answer(200, b"x" * 11))
    with pytest.raises(TooLarge) as refused:
        net.http().get(URL, limit=10)
    assert str(refused.value) == f"{URL}: the answer is longer than the 10 bytes asked for"


def test_a_connection_dropped_while_the_body_is_read_is_unreachable_by_host() -> None:
    net = Net().route("GET", URL, Answer(200, b"x" * 100, cut_after=40))
    with pytest.raises(Unreachable) as dropped:
        net.http().get(URL, limit=1000)
    assert str(dropped.value) == "pypi.example is unreachable: ChunkedEncodingError"


def test_each_request_carries_its_credentials_query_certificates_and_redirect_choice() -> None:
    net = Net().route("GET", URL, Answer(302, b"", {"Location": "https://pypi.example/elsewhere"}))
    http = Http(Policy(workers=1), session_factory=net.session, sleep=net.waits.append, verify="/ca.pem")
    reply = http.get(URL, auth=("user", "pw"), params={"name": ["a", "b"]}, allow_redirects=False)
    assert (reply.status, reply.header("Location")) == (302, "https://pypi.example/elsewhere")
    assert len(net.sent) == 1
    assert net.sent[0].basic == "dXNlcjpwdw=="
    assert net.sent[0].query == {"name": ["a", "b"]}
    assert net.options == [{"verify": "/ca.pem", "stream": False}]


def test_an_error_no_retry_helps_is_unreachable_at_once_and_the_host_is_asked_again() -> None:
    net = Net().route("GET", URL, requests.TooManyRedirects("30 redirects"), Answer(200, b"ok"))
    http = net.http(Policy(retries=4, connect_retries=3, workers=1))
    with pytest.raises(Unreachable, match=r"^pypi\.example is unreachable: TooManyRedirects$"):
        http.get(URL)
    assert (len(net.sent), net.waits) == (1, [])
    assert http.get(URL).body == b"ok"


def test_a_failed_connection_on_the_last_attempt_gives_up_even_with_connection_retries_left() -> None:
    net = Net().route("GET", URL, requests.ConnectionError("refused"))
    http = net.http(Policy(retries=1, connect_retries=5, workers=1))
    with pytest.raises(Unreachable, match=r"^pypi\.example is unreachable: ConnectionError$"):
        http.get(URL)
    assert (len(net.sent), net.waits) == (2, [0.5])
    with pytest.raises(Unreachable):  # given up on: not asked again
        http.get(URL)
    assert len(net.sent) == 2


def test_a_streamed_answer_is_retried_while_busy_and_closed_after_use() -> None:
    net = Net().route("GET", URL, Answer(503, b""), Answer(200, b"blob"))
    http = net.http()
    with http.stream("GET", URL, headers={"Accept": "x"}, auth=("u", "p")) as response:
        assert response.content == b"blob"
    assert net.waits == [0.5]
    assert net.sent[-1].headers["Accept"] == "x" and net.sent[-1].basic == "dTpw"
    assert net.options[-1]["stream"] is True


def test_a_streamed_blob_follows_the_registry_redirect_to_its_storage() -> None:
    # registries answer a blob GET with a redirect to object storage: a stream that stopped there would read nothing
    net = Net().route("GET", URL, Answer(307, b"", {"Location": "https://storage.example/blob"}))
    net.route("GET", "https://storage.example/blob", Answer(200, b"blob"))
    with net.http().stream("GET", URL) as response:
        assert (response.status_code, response.content) == (200, b"blob")
    assert [s.url for s in net.sent] == [URL, "https://storage.example/blob"]


def _threads(net: Net, cached: set[str], urls: list[str], workers: int, tmp_path: Path) -> list[bool]:
    """For each url, whether Http.map ran it on the calling thread; `cached` urls are in the cache first."""
    http = net.http(Policy(workers=workers), cache=DiskCache(tmp_path))
    for url in cached:
        http.get(url, cache=CacheKind.IMMUTABLE)
    main = threading.get_ident()

    def fetch(url: str) -> bool:
        http.get(url, cache=CacheKind.IMMUTABLE)
        return threading.get_ident() == main

    return http.map(fetch, urls)


def test_map_stays_on_the_calling_thread_while_the_cache_answers_and_goes_parallel_after(tmp_path: Path) -> None:
    net = Net().on(lambda sent: Answer(200, b"x"))
    urls = [f"https://x.example/{i}" for i in range(5)]
    assert _threads(net, set(urls[:2]), urls, 4, tmp_path / "a") == [True, True, True, False, False]
    assert _threads(net, set(urls), urls, 4, tmp_path / "b") == [True] * 5


def test_map_does_not_start_threads_for_one_item_left_or_one_worker(tmp_path: Path) -> None:
    net = Net().on(lambda sent: Answer(200, b"x"))
    urls = [f"https://x.example/{i}" for i in range(3)]
    assert _threads(net, set(urls[:1]), urls, 4, tmp_path / "a") == [True, True, True]
    assert _threads(net, set(), urls, 1, tmp_path / "b") == [True, True, True]
    assert _threads(net, set(), urls, 2, tmp_path / "c") == [True, False, False]


def test_counters_by_host_sorted_and_reply_basics() -> None:
    net = Net().on(lambda sent: Answer(200, b"abc", {"X-Thing": "1"}))
    http = net.http()
    for url in ("https://b.example/", "https://a.example/", "https://b.example/"):
        http.get(url)
    assert json.dumps(http.counters.as_json()) == json.dumps(
        {"requests": 3, "bytes": 9, "retries": 0, "cache_hits": 0, "by_host": {"a.example": 1, "b.example": 2}}
    )
    reply = http.get("https://a.example/")
    assert reply.header("X-THING") == "1" and reply.header("missing") is None
    assert [Reply(s, {}, b"", "").ok for s in (199, 200, 299, 300)] == [False, True, True, False]
    assert Reply(200, {}, b'{"a": [1]}', "").json() == {"a": [1]}


# --- the cache -------------------------------------------------------------------------------------------


def test_a_mutable_answer_is_served_up_to_its_age_limit_exactly(tmp_path: Path) -> None:
    clock = [1000.0]
    cache = DiskCache(tmp_path, max_age=60, now=lambda: clock[0])
    cache.put("k", Stored(200, {}, b"x", URL))
    clock[0] += 60
    assert cache.get("k", CacheKind.MUTABLE) is not None
    clock[0] += 1
    assert cache.get("k", CacheKind.MUTABLE) is None
    assert cache.get("k", CacheKind.IMMUTABLE) is not None


def test_the_cache_keeps_status_url_and_only_the_headers_that_describe_the_body(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    headers = {"content-type": "text/html", "etag": '"e"', "set-cookie": "session=secret", "www-authenticate": "x"}
    cache.put("k", Stored(404, headers, b"gone", "https://files.example/after-redirect"))
    assert cache.get("k", CacheKind.MUTABLE) == Stored(
        404, {"content-type": "text/html", "etag": '"e"'}, b"gone", "https://files.example/after-redirect"
    )
    assert b"secret" not in b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def _entry(tmp_path: Path) -> tuple[Path, Path]:
    (meta,) = tmp_path.rglob("*.json")
    return meta, meta.with_suffix(".body")


def test_an_entry_for_another_key_or_with_the_same_size_but_other_bytes_is_a_miss(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put("k", Stored(200, {}, b"abcd", URL))
    meta, body = _entry(tmp_path)
    recorded = json.loads(meta.read_text())
    meta.write_text(json.dumps({**recorded, "key": "other"}))
    assert cache.get("k", CacheKind.IMMUTABLE) is None
    meta.write_text(json.dumps(recorded))
    assert cache.get("k", CacheKind.IMMUTABLE) is not None
    body.write_bytes(b"abce")
    assert cache.get("k", CacheKind.IMMUTABLE) is None
    meta.write_text("{not json")
    assert cache.get("k", CacheKind.IMMUTABLE) is None


def test_a_mutable_entry_without_a_time_is_stale(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_age=60, now=lambda: 1000.0)
    cache.put("k", Stored(200, {}, b"x", URL))
    meta, _ = _entry(tmp_path)
    recorded = json.loads(meta.read_text())
    del recorded["time"]
    meta.write_text(json.dumps(recorded))
    assert cache.get("k", CacheKind.MUTABLE) is None
    assert cache.get("k", CacheKind.IMMUTABLE) is not None


def test_a_cache_write_that_fails_leaves_no_half_file_behind(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put("k", Stored(200, {}, b"first", URL))
    meta, body = _entry(tmp_path)
    body.unlink()
    body.mkdir()  # the rename onto it fails
    cache.put("k", Stored(200, {}, b"second", URL))
    assert sorted(p.name for p in meta.parent.iterdir()) == sorted([meta.name, body.name])
    assert cache.get("k", CacheKind.IMMUTABLE) is None


def test_a_connection_lost_while_a_streamed_body_is_read_is_unreachable() -> None:
    net = Net().route("GET", URL, Answer(200, b"x" * 100, cut_after=10))
    lost = pytest.raises(Unreachable, match=r"^pypi\.example is unreachable: ChunkedEncodingError$")
    with lost, net.http().stream("GET", URL) as response:
        b"".join(response.iter_content(64))


def test_the_cache_tells_apart_methods_queries_and_accepted_types(tmp_path: Path) -> None:
    def echo(sent: Sent) -> Answer:
        accept = {k.lower(): v for k, v in sent.headers.items()}.get("accept")
        return Answer(200, f"{sent.method} {sent.url} {accept}".encode())

    net = Net().on(echo)
    http = net.http(cache=DiskCache(tmp_path))
    asked = [
        ("HEAD", {}, {}),
        ("GET", {}, {}),
        ("GET", {"page": "1"}, {}),
        ("GET", {"page": "2"}, {}),
        ("GET", {}, {"Accept": "application/json"}),
        ("GET", {}, {"accept": "text/html"}),
    ]
    for _ in range(2):
        for method, params, headers in asked:
            http.request(method, URL, params=params, headers=headers, cache=CacheKind.IMMUTABLE)
    assert len(net.sent) == len(asked)
    assert http.get(URL, headers={"Accept": "text/html"}, cache=CacheKind.IMMUTABLE).body.endswith(b"text/html")


def test_map_runs_at_most_policy_workers_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int | None] = []

    class Pool(ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers=max_workers)

    monkeypatch.setattr("builder.net.http.ThreadPoolExecutor", Pool)
    net = Net().on(lambda sent: Answer(200, b"x"))
    http = net.http(Policy(workers=3))
    assert len(http.map(lambda url: http.get(url).body, [f"https://x.example/{i}" for i in range(6)])) == 6
    assert sizes == [3]


def test_unreachable_keeps_the_host_and_the_reason() -> None:
    net = Net().route("GET", URL, requests.ConnectionError("refused"))
    with pytest.raises(Unreachable) as raised:
        net.http(Policy(retries=0, workers=1)).get(URL)
    assert (raised.value.host, raised.value.reason) == ("pypi.example", "ConnectionError")


def test_an_entry_written_without_headers_or_url_is_served_with_none(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put("k", Stored(200, {"etag": "e"}, b"x", URL))
    meta, _ = _entry(tmp_path)
    recorded = json.loads(meta.read_text())
    del recorded["headers"], recorded["url"]
    meta.write_text(json.dumps(recorded))
    assert cache.get("k", CacheKind.IMMUTABLE) == Stored(200, {}, b"x", "")


def test_the_cache_layout_stays_findable_and_mutable_answers_live_a_day_by_default(tmp_path: Path) -> None:
    clock = [1000.0]
    cache = DiskCache(tmp_path, now=lambda: clock[0])
    cache.put("k", Stored(200, {}, b"x", URL))
    digest = hashlib.sha256(b"k").hexdigest()  # a cache folder made by an earlier run: the same place
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.*")) == [
        f"{digest[:2]}/{digest}.body",
        f"{digest[:2]}/{digest}.json",
    ]
    clock[0] += 86400
    assert cache.get("k", CacheKind.MUTABLE) is not None
    clock[0] += 1
    assert cache.get("k", CacheKind.MUTABLE) is None


def test_the_cache_is_written_beside_its_entries_not_in_the_system_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmp"))  # a full or missing /tmp
    cache = DiskCache(tmp_path / "cache")
    cache.put("k", Stored(200, {}, b"x", URL))
    assert cache.get("k", CacheKind.IMMUTABLE) == Stored(200, {}, b"x", URL)


def test_a_request_not_meant_for_the_cache_leaves_nothing_in_it(tmp_path: Path) -> None:
    net = Net().route("GET", REALM, Answer(200, b'{"token": "secret"}'))
    http = net.http(cache=DiskCache(tmp_path))
    assert http.get(REALM).body == b'{"token": "secret"}'  # the token service: never cached
    assert list(tmp_path.iterdir()) == []


def test_failed_connections_count_per_host() -> None:
    failed: set[str] = set()

    def once_per_host(sent: Sent) -> Answer | Exception:
        host = sent.url.split("/")[2]
        if host in failed:
            return Answer(200, host.encode())
        failed.add(host)
        return requests.ConnectionError("reset")

    http = Net().on(once_per_host).http(Policy(connect_retries=1, workers=1))
    assert [http.get(f"https://{h}/").body for h in ("a.example", "b.example")] == [b"a.example", b"b.example"]


def test_a_thread_keeps_its_session_and_each_thread_has_its_own() -> None:
    net = Net().on(lambda sent: Answer(200, b"x"))
    made: list[object] = []

    def factory() -> requests.Session:
        made.append(threading.get_ident())
        return net.session()

    http = Http(Policy(workers=2), session_factory=factory, sleep=net.waits.append)
    for _ in range(3):
        http.get(URL)
    assert len(made) == 1  # connections are kept alive between requests
    http.map(lambda i: http.get(f"{URL}{i}").body, range(5))
    assert 2 <= len(made) <= 3 and len(set(made)) == len(made)


def test_certificates_are_verified_unless_told_otherwise() -> None:
    net = Net().on(lambda sent: Answer(200, b"x"))
    Http(Policy(workers=1), session_factory=net.session, sleep=net.waits.append).get(URL)
    assert net.options == [{"verify": True, "stream": False}]
