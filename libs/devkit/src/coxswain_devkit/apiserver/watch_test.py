"""Watches through the real client's `Watch`: resuming, filtering, bookmarks, timeouts, 410.

Covers replay from a resourceVersion then live events, the initial ADDED events of a watch with
no resourceVersion, selector transitions (an object leaving the selection is DELETED, one entering
it ADDED), BOOKMARK events, `timeoutSeconds`, 410 for a resourceVersion older than the window, and
the recovery path across a restart: the resumed watch gets 410 and a relist recovers every object;
watch-list (`sendInitialEvents`): the state, the initial-events-end BOOKMARK, then changes.
Closing watches as a fault is in faults_test.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes.client import ApiException

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import TEST_WINDOW, new_watch


@contextmanager
def watching(core: Any, **kwargs: Any) -> Iterator[Iterator[dict[str, Any]]]:
    kwargs.setdefault("timeout_seconds", 30)
    w = new_watch()
    stream = w.stream(core.list_namespaced_config_map, "default", **kwargs)
    try:
        yield stream
    finally:
        w.stop()
        stream.close()


def _seen(event: dict[str, Any]) -> tuple[str, str]:
    return (event["type"], event["raw_object"]["metadata"].get("name", ""))


def _cm(core: Any, name: str, **labels: str) -> Any:
    return core.create_namespaced_config_map(
        "default", {"metadata": {"name": name, "labels": labels}}
    )


def test_resume_from_a_resource_version_then_follow_live_changes(core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    _cm(core, "a")
    core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    with watching(core, resource_version=rv) as events:
        assert [_seen(next(events)), _seen(next(events))] == [("ADDED", "a"), ("MODIFIED", "a")]
        core.delete_namespaced_config_map("a", "default")
        gone = next(events)
    assert _seen(gone) == ("DELETED", "a")
    assert int(gone["raw_object"]["metadata"]["resourceVersion"]) > int(rv)


def test_a_watch_without_resource_version_starts_with_the_current_objects(core: Any) -> None:
    _cm(core, "a")
    _cm(core, "b")
    with watching(core) as events:
        assert [_seen(next(events)), _seen(next(events))] == [("ADDED", "a"), ("ADDED", "b")]
        _cm(core, "c")
        assert _seen(next(events)) == ("ADDED", "c")


def test_selector_transitions_become_added_and_deleted(core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    _cm(core, "a", tier="front")
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"tier": "back"}}})
    core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"tier": "front"}}})
    _cm(core, "other", tier="back")
    with watching(core, resource_version=rv, label_selector="tier=front") as events:
        seen = [_seen(next(events)) for _ in range(3)]
    assert seen == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "a")]


def test_bookmarks_carry_the_latest_resource_version(core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_secret("default", {"metadata": {"name": "unrelated"}})
    with watching(core, resource_version=rv, allow_watch_bookmarks=True) as events:
        event = next(events)
    assert event["type"] == "BOOKMARK"
    assert int(event["raw_object"]["metadata"]["resourceVersion"]) > int(rv)


def test_timeout_seconds_ends_the_stream(core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    with watching(core, resource_version=rv, timeout_seconds=1) as events:
        assert list(events) == []


def test_a_resource_version_older_than_the_window_is_410(core: Any) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    _cm(core, "a")
    for i in range(TEST_WINDOW):
        core.patch_namespaced_config_map("a", "default", {"data": {"i": str(i)}})
    with pytest.raises(ApiException) as raised, watching(core, resource_version=rv) as events:
        next(events)
    assert raised.value.status == 410


def test_a_watch_that_misses_events_across_a_restart_gets_410_and_a_relist_recovers(
    api: ThreadedApiServer, core: Any
) -> None:
    for name in ("a", "b", "c"):
        _cm(core, name)
    listed = core.list_namespaced_config_map("default")
    with watching(core, resource_version=listed.metadata.resource_version) as events:
        _cm(core, "d")
        last_seen = next(events)["raw_object"]["metadata"]["resourceVersion"]
        api.call(lambda server: server.restart())
        assert list(events) == [], "the restart ends the stream"
    # While the watcher was away, another client changed things.
    core.delete_namespaced_config_map("a", "default")
    core.patch_namespaced_config_map("b", "default", {"data": {"changed": "yes"}})
    _cm(core, "e")
    with (
        pytest.raises(ApiException) as raised,
        watching(core, resource_version=last_seen) as events,
    ):
        next(events)
    assert raised.value.status == 410
    relisted = core.list_namespaced_config_map("default")
    assert [o.metadata.name for o in relisted.items] == ["b", "c", "d", "e"]
    assert relisted.items[0].data == {"changed": "yes"}
    with watching(core, resource_version=relisted.metadata.resource_version) as events:
        _cm(core, "f")
        assert _seen(next(events)) == ("ADDED", "f")


def test_watch_list_sends_the_state_then_the_initial_events_end_bookmark(core: Any) -> None:
    """KEP-3157, as kubectl 1.37's informers ask: the current objects whatever the
    resourceVersion, a BOOKMARK annotated k8s.io/initial-events-end, then changes."""
    _cm(core, "a")
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    _cm(core, "b")
    query = {"send_initial_events": True, "allow_watch_bookmarks": True,
             "resource_version_match": "NotOlderThan", "resource_version": rv}  # fmt: skip
    with watching(core, **query) as events:
        first = [_seen(next(events)), _seen(next(events))]
        bookmark = next(events)
        _cm(core, "c")
        after = next(e for e in events if e["type"] != "BOOKMARK")  # periodic ones may come
    assert sorted(first) == [("ADDED", "a"), ("ADDED", "b")]
    assert bookmark["type"] == "BOOKMARK"
    metadata = bookmark["raw_object"]["metadata"]
    assert metadata["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(metadata["resourceVersion"]) > int(rv)
    assert _seen(after) == ("ADDED", "c")
