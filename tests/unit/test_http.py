"""builder.net.http: retries with backoff on 429/5xx and dropped connections, Retry-After, the timeout
given to every request, the request budget, redirects, counters, and the on-disk cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from http_kit import Answer, Net

from builder.core.errors import UpstreamError
from builder.net.cache import CacheKind, DiskCache
from builder.net.http import BudgetSpent, Policy, Unreachable

URL = "https://pypi.example/simple/torch/"


def test_a_429_then_success_waits_as_told_and_returns_the_answer() -> None:
    net = Net().route("GET", URL, Answer(429, b"slow down", {"Retry-After": "7"}), Answer(200, b"ok"))
    http = net.http()
    reply = http.get(URL)
    assert (reply.status, reply.body) == (200, b"ok")
    assert net.waits == [7.0]
    assert (http.counters.requests, http.counters.retries, http.counters.bytes) == (2, 1, 2)


def test_5xx_backs_off_exponentially_and_a_lasting_500_comes_back_as_an_answer() -> None:
    net = Net().route("GET", URL, Answer(500, b"boom"))
    reply = net.http(Policy(retries=3, backoff=0.5, workers=1)).get(URL)
    assert reply.status == 500
    assert net.waits == [0.5, 1.0, 2.0]
    assert len(net.sent) == 4


def test_a_retry_after_longer_than_the_cap_is_capped() -> None:
    net = Net().route("GET", URL, Answer(503, b"", {"Retry-After": "3600"}), Answer(200, b"ok"))
    net.http(Policy(max_delay=5.0, workers=1)).get(URL)
    assert net.waits == [5.0]


def test_a_4xx_is_not_retried() -> None:
    net = Net().route("GET", URL, Answer(403, b"no"))
    assert net.http().get(URL).status == 403
    assert (len(net.sent), net.waits) == (1, [])


def test_a_timeout_is_retried_then_unreachable_names_host_and_reason() -> None:
    net = Net().route("GET", URL, requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(Unreachable) as raised:
        net.http(Policy(retries=4, connect_retries=2, workers=1)).get(URL)
    assert str(raised.value) == "pypi.example is unreachable: ReadTimeout"
    assert isinstance(raised.value, UpstreamError) and raised.value.exit_code == 5
    assert len(net.sent) == 3


def test_connection_failures_get_fewer_retries_than_a_busy_server() -> None:
    net = Net().route("GET", URL, requests.ConnectionError("refused"))
    with pytest.raises(Unreachable):
        net.http(Policy(retries=4, workers=1)).get(URL)
    assert (len(net.sent), net.waits) == (2, [0.5])


def test_a_host_given_up_on_is_not_asked_again() -> None:
    net = Net().on(lambda sent: requests.ConnectionError("refused") if "dead" in sent.url else Answer(200, b"ok"))
    http = net.http()
    for _ in range(3):
        with pytest.raises(Unreachable, match=r"^dead\.example is unreachable: ConnectionError$"):
            http.get("https://dead.example/x")
    assert http.get(URL).body == b"ok"
    assert [s.url for s in net.sent].count("https://dead.example/x") == 2


def test_a_dropped_connection_then_success() -> None:
    net = Net().route("GET", URL, requests.ConnectionError("reset"), Answer(200, b"ok"))
    assert net.http().get(URL).body == b"ok"


def test_every_request_carries_the_timeout() -> None:
    net = Net().route("GET", URL, Answer(200, b"ok"))
    net.http(Policy(timeout=3.5, workers=1)).get(URL)
    assert net.timeouts == [3.5]


def test_the_budget_stops_the_request_after_the_last_allowed_one() -> None:
    net = Net().route("GET", URL, Answer(200, b"ok"))
    http = net.http(Policy(budget=2, workers=1))
    http.get(URL)
    http.get(URL)
    with pytest.raises(BudgetSpent, match=r"^request budget spent: 2 requests \(raise it with --max-requests\)$"):
        http.get(URL)
    assert len(net.sent) == 2


def test_retries_count_against_the_budget() -> None:
    net = Net().route("GET", URL, Answer(502, b""))
    with pytest.raises(BudgetSpent):
        net.http(Policy(budget=3, retries=5, workers=1)).get(URL)
    assert len(net.sent) == 3


def test_a_redirect_is_followed_counted_and_drops_credentials_on_another_host() -> None:
    net = Net()
    net.route("GET", URL, Answer(302, b"", {"Location": "https://files.example/torch.whl"}))
    net.route("GET", "https://files.example/torch.whl", Answer(206, b"tail"))
    http = net.http()
    reply = http.get(URL, headers={"Authorization": "Bearer secret", "Range": "bytes=-4"})
    assert (reply.status, reply.body, reply.url) == (206, b"tail", "https://files.example/torch.whl")
    assert [s.headers.get("Authorization") for s in net.sent] == ["Bearer secret", None]
    assert net.sent[1].headers["Range"] == "bytes=-4"
    assert http.counters.requests == 2


def test_map_keeps_the_order_and_runs_in_parallel() -> None:
    net = Net().on(lambda sent: Answer(200, sent.url.rsplit("/", 1)[1].encode()))
    http = net.http(Policy(workers=4))
    urls = [f"https://x.example/{i}" for i in range(20)]
    assert http.map(lambda url: http.get(url).body.decode(), urls) == [str(i) for i in range(20)]


# --- the cache -------------------------------------------------------------------------------------------


def test_a_cached_answer_costs_no_request(tmp_path: Path) -> None:
    net = Net().route("GET", URL, Answer(200, b"index", {"Content-Type": "application/json"}))
    first = net.http(cache=DiskCache(tmp_path)).get(URL, cache=CacheKind.MUTABLE)
    again = net.http(cache=DiskCache(tmp_path))
    second = again.get(URL, cache=CacheKind.MUTABLE)
    assert (first.cached, second.cached, second.body, second.header("content-type")) == (
        False,
        True,
        b"index",
        "application/json",
    )
    assert len(net.sent) == 1
    assert (again.counters.requests, again.counters.cache_hits) == (0, 1)


def test_the_cache_key_holds_the_range_and_accept_headers(tmp_path: Path) -> None:
    net = Net().on(lambda sent: Answer(206, sent.headers.get("Range", "").encode()))
    http = net.http(cache=DiskCache(tmp_path))
    assert http.get(URL, headers={"Range": "bytes=-10"}, cache=CacheKind.IMMUTABLE).body == b"bytes=-10"
    assert http.get(URL, headers={"Range": "bytes=0-9"}, cache=CacheKind.IMMUTABLE).body == b"bytes=0-9"
    assert len(net.sent) == 2


def test_mutable_answers_expire_and_immutable_ones_do_not(tmp_path: Path) -> None:
    clock = [1000.0]
    net = Net().on(lambda sent: Answer(200, b"x"))
    http = net.http(cache=DiskCache(tmp_path, max_age=60, now=lambda: clock[0]))
    http.get(URL, cache=CacheKind.MUTABLE)
    http.get(URL + "f.whl", cache=CacheKind.IMMUTABLE)
    clock[0] += 61
    http.get(URL, cache=CacheKind.MUTABLE)
    http.get(URL + "f.whl", cache=CacheKind.IMMUTABLE)
    assert net.urls() == [URL, URL + "f.whl", URL]


def test_failures_and_refusals_are_not_cached_but_404_is(tmp_path: Path) -> None:
    net = Net()
    net.route("GET", URL, Answer(500, b""))
    net.route("GET", URL + "a", Answer(401, b""))
    net.route("GET", URL + "b", Answer(404, b"gone"))
    http = net.http(Policy(retries=0, workers=1), cache=DiskCache(tmp_path))
    for _ in range(2):
        for url in (URL, URL + "a", URL + "b"):
            http.get(url, cache=CacheKind.MUTABLE)
    assert net.urls() == [URL, URL + "a", URL + "b", URL, URL + "a"]


def test_a_damaged_cache_entry_is_a_miss(tmp_path: Path) -> None:
    net = Net().route("GET", URL, Answer(200, b"index"))
    net.http(cache=DiskCache(tmp_path)).get(URL, cache=CacheKind.MUTABLE)
    for body in tmp_path.rglob("*.body"):
        body.write_bytes(b"trunc")
    assert net.http(cache=DiskCache(tmp_path)).get(URL, cache=CacheKind.MUTABLE).body == b"index"
    assert len(net.sent) == 2


def test_an_unwritable_cache_is_no_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    net = Net().route("GET", URL, Answer(200, b"index"))
    http = net.http(cache=DiskCache(blocker / "cache"))
    assert http.get(URL, cache=CacheKind.MUTABLE).body == b"index"
    assert http.get(URL, cache=CacheKind.MUTABLE).body == b"index"
    assert len(net.sent) == 2
