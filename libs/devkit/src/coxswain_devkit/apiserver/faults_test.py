"""Injected faults, seen by the real client: failures, pauses, latency, closed watches, restarts.

Covers `fail_next` with 500 and with 429 (Retry-After, which the client's retries honour),
`pause` holding a request until `resume`, `latency` delaying each answer, `close_watches` ending
an open watch at once, and `restart` keeping objects, uids and the port. The 410 that follows a
restart is in watch_test.py.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes.client import ApiException

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import new_watch


def test_fail_next_fails_exactly_that_many_requests(api: ThreadedApiServer, core: Any) -> None:
    api.call(lambda s: s.faults.fail_next(2, code=500))
    for _ in range(2):
        with pytest.raises(ApiException) as raised:
            core.list_namespace()
        assert raised.value.status == 500
        assert json.loads(raised.value.body or "")["reason"] == "InternalError"
    assert core.list_namespace().items


def test_429_says_when_to_retry(api: ThreadedApiServer) -> None:
    api.call(lambda s: s.faults.fail_next(1, code=429))
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{api.url}/api/v1/namespaces", timeout=10)
    with raised.value as response:
        assert response.code == 429
        assert response.headers["Retry-After"] == "1"
        assert json.loads(response.read())["reason"] == "TooManyRequests"


def test_the_client_rides_out_a_429_by_honouring_retry_after(
    api: ThreadedApiServer, core: Any
) -> None:
    api.call(lambda s: s.faults.fail_next(1, code=429))
    assert core.read_namespace("default").metadata.name == "default"


def test_pause_holds_requests_until_resume(api: ThreadedApiServer, core: Any) -> None:
    api.call(lambda s: s.faults.pause())
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(core.read_namespace, "default")
        api.call(lambda s: s.faults.wait_held(1))
        assert not pending.done()
        api.call(lambda s: s.faults.resume())
        assert pending.result(timeout=30).metadata.name == "default"


def test_latency_delays_every_answer(api: ThreadedApiServer, core: Any) -> None:
    api.call(lambda s: setattr(s.faults, "latency", 0.3))
    started = time.monotonic()
    core.read_namespace("default")
    assert time.monotonic() - started >= 0.3


def test_close_watches_ends_open_watches(api: ThreadedApiServer, core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    w = new_watch()
    events = w.stream(
        core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=60
    )
    started = time.monotonic()
    try:
        core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        assert next(events)["type"] == "ADDED"
        api.call(lambda s: s.faults.close_watches())
        assert list(events) == []
    finally:
        events.close()
    assert time.monotonic() - started < 30


def test_restart_keeps_objects_and_port(api: ThreadedApiServer, core: Any) -> None:
    created = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "kept"}, "data": {"k": "v"}}
    )
    url = api.url
    api.call(lambda s: s.restart())
    assert api.url == url
    again = core.read_namespaced_config_map("kept", "default")
    assert (again.metadata.uid, again.data) == (created.metadata.uid, {"k": "v"})
