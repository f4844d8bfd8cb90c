"""Paced traffic counts what a client noticed: failed requests, and in how many outages.

A real HTTP server on 127.0.0.1 answers 200, then 503 for a while, then 200 again; the count
of failures and outages is read after the fact. The pacing itself is not timed.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from coxswain_devkit.traffic import Address, Traffic, get


class _Switchable(http.server.BaseHTTPRequestHandler):
    status = 200
    served = 0

    def do_GET(self) -> None:
        type(self).served += 1
        body = b'{"pod": "echo-0"}'
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Address]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Switchable)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


def _until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_one_outage_is_counted_once_with_each_failed_request(server: Address) -> None:
    _Switchable.status = 200
    assert get(server, "a.example") == (200, {"pod": "echo-0"})
    with Traffic(server, "a.example", interval=0.001) as traffic:
        _until(lambda: traffic.sent >= 5)
        _Switchable.status = 503
        _until(lambda: len(traffic.failures) >= 5)
        _Switchable.status = 200
        failed = len(traffic.failures)
        _until(lambda: traffic.sent >= failed + 15)
    assert traffic.outages() == 1
    assert traffic.outcomes[-1] is True
    assert {error for _, error in traffic.failures} == {"503"}
    assert "outage(s)" in traffic.summary()


def test_a_refused_connection_is_a_failure() -> None:
    with Traffic(("127.0.0.1", 1), "a.example", interval=0.001) as traffic:
        _until(lambda: traffic.sent >= 3)
    assert traffic.outages() == 1 and not any(traffic.outcomes)
    assert "ConnectionRefusedError" in traffic.failures[0][1]
