"""The store alone: one counter for every write, the change window, rollback and compaction.

Covers resourceVersion order across kinds, `changes_after` within and past the window, a
snapshot at an older resourceVersion (created, modified and deleted objects rolled back), and
`compact`. What HTTP clients see of these (410s, pages) is in watch_test.py and listing_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_devkit.apiserver.store import Expired, Key, Store

CM = ("", "configmaps")


def _key(name: str, plural: str = "configmaps") -> Key:
    return Key("", plural, "ns", name)


def _obj(name: str, value: str = "1") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}}


def test_one_counter_orders_writes_of_every_kind() -> None:
    store = Store()
    a = store.write(_key("a"), _obj("a"))
    s = store.write(_key("s", "secrets"), _obj("s"))
    gone = store.remove(_key("a"))
    versions = [int(o["metadata"]["resourceVersion"]) for o in (a, s, gone)]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert store.resource_version == versions[-1]


def test_changes_after_and_expiry_past_the_window() -> None:
    store = Store(window=3)
    start = store.resource_version
    for i in range(3):
        store.write(_key(f"o{i}"), _obj(f"o{i}"))
    assert [c.type for c in store.changes_after(start)] == ["ADDED"] * 3
    store.write(_key("o0"), _obj("o0", "2"))
    with pytest.raises(Expired):
        store.changes_after(start)
    assert [c.type for c in store.changes_after(start + 1)] == ["ADDED", "ADDED", "MODIFIED"]


def test_snapshot_rolls_back_creates_updates_and_deletes() -> None:
    store = Store()
    store.write(_key("kept"), _obj("kept", "old"))
    store.write(_key("deleted"), _obj("deleted"))
    rv = store.resource_version
    store.write(_key("kept"), _obj("kept", "new"))
    store.remove(_key("deleted"))
    store.write(_key("created"), _obj("created"))
    then = store.snapshot(CM, "ns", rv)
    assert [(o["metadata"]["name"], o["data"]["v"]) for o in then] == [
        ("deleted", "1"),
        ("kept", "old"),
    ]


def test_compact_expires_every_older_resource_version() -> None:
    store = Store()
    store.write(_key("a"), _obj("a"))
    rv = store.resource_version
    store.compact()
    assert store.resource_version > rv
    assert store.changes_after(store.resource_version) == []
    with pytest.raises(Expired):
        store.changes_after(rv)
