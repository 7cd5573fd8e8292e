"""The scrape endpoint off the application's hot path: the exposition made at most once per CACHE_S and
shared, a few scrapes answered at once and the rest told 503 at once (a real server on 127.0.0.1)."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry, Counter

from groundtrace.telemetry.endpoint import CachedExposition, serve


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def call(app, accept: str = "") -> tuple[str, bytes]:
    said = {}
    body = b"".join(app({"PATH_INFO": "/metrics", "HTTP_ACCEPT": accept}, lambda status, headers: said.update(s=status)))
    return said["s"], body


def test_the_exposition_is_made_once_per_period_and_per_kind_of_answer():
    made = []

    def inner(environ, start_response):
        made.append(environ.get("HTTP_ACCEPT"))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"n {len(made)}\n".encode()]

    clock = Clock()
    app = CachedExposition(inner, cache_s=1.0, clock=clock)
    assert [call(app)[1] for _ in range(5)] == [b"n 1\n"] * 5
    assert call(app, "application/openmetrics-text")[1] == b"n 2\n"  # another kind of answer: made for it
    clock.now = 1.0
    assert call(app)[1] == b"n 3\n"
    assert app.made == 3


def test_beyond_the_concurrent_scrapes_the_answer_is_503_at_once():
    release = threading.Event()

    def slow(environ, start_response):
        release.wait(5)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok\n"]

    app = CachedExposition(slow, cache_s=1.0, concurrent=2)
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(call, app) for _ in range(2)]
        time.sleep(0.2)
        assert call(app) == ("503 Service Unavailable", b"busy: too many scrapes at once\n")
        assert not any(h.done() for h in held)  # answered while both scrapes were still held: at once
        release.set()
        assert [future.result()[0] for future in held] == ["200 OK", "200 OK"]
    assert app.refused == 1


def test_200_scrapes_at_once_make_few_expositions_and_all_get_an_answer():
    registry = CollectorRegistry()
    Counter("groundtrace_test_scrapes", "a series to serve", registry=registry).inc(3)
    server, thread, app = serve("127.0.0.1", 0, registry)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"

    def scrape() -> int:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                assert b"groundtrace_test_scrapes_total 3.0" in answer.read()
                return answer.status
        except urllib.error.HTTPError as error:
            return error.code

    try:
        with ThreadPoolExecutor(200) as pool:
            statuses = list(pool.map(lambda _: scrape(), range(200)))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 4
    assert statuses.count(503) == app.refused
    assert app.made <= 10  # one per half second of the burst, not one per scrape
