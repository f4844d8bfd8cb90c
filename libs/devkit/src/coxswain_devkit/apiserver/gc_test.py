"""Background garbage collection and namespace deletion, waited for through watches.

Covers dependents deleted after their owner (and their own dependents after them), dependents
kept while any owner remains, `propagationPolicy=Orphan` keeping dependents without the owner
reference, and a namespace's contents going with it. Waits use a watch for the DELETED event,
never a sleep. Leaves out foreground deletion, which the emulator treats as background.
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver.conftest import new_watch


def _owned(core: Any, name: str, *owners: Any) -> Any:
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": o.metadata.name, "uid": o.metadata.uid}
        for o in owners
    ]
    return core.create_namespaced_config_map(
        "default", {"metadata": {"name": name, "ownerReferences": refs}}
    )


def _wait_deleted(core: Any, namespace: str, names: set[str], rv: str) -> None:
    w = new_watch()
    for event in w.stream(
        core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=30
    ):
        if event["type"] == "DELETED":
            names.discard(event["raw_object"]["metadata"]["name"])
        if not names:
            w.stop()
    assert not names, f"still not deleted: {names}"


def _names(core: Any, namespace: str = "default") -> list[str]:
    return [o.metadata.name for o in core.list_namespaced_config_map(namespace).items]


def test_dependents_go_after_their_owner_transitively(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    child = _owned(core, "child", owner)
    _owned(core, "grandchild", child)
    _owned(core, "unrelated")
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.delete_namespaced_config_map("owner", "default")
    _wait_deleted(core, "default", {"child", "grandchild"}, rv)
    assert _names(core) == ["unrelated"]


def test_a_dependent_stays_while_another_owner_exists(core: Any) -> None:
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "first"}})
    second = core.create_namespaced_config_map("default", {"metadata": {"name": "second"}})
    _owned(core, "shared", first, second)
    lonely = _owned(core, "lonely", first)
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.delete_namespaced_config_map("first", "default")
    _wait_deleted(core, "default", {lonely.metadata.name}, rv)
    assert _names(core) == ["second", "shared"]


def test_orphan_propagation_keeps_dependents(core: Any) -> None:
    owner = core.create_namespaced_config_map("default", {"metadata": {"name": "owner"}})
    _owned(core, "child", owner)
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    child = core.read_namespaced_config_map("child", "default")
    assert not child.metadata.owner_references


def test_a_deleted_namespace_takes_its_contents(core: Any) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "a"}})
    core.create_namespaced_secret("team", {"metadata": {"name": "s"}})
    rv = core.list_namespace().metadata.resource_version
    core.delete_namespace("team")
    w = new_watch()
    for event in w.stream(core.list_namespace, resource_version=rv, timeout_seconds=30):
        if event["type"] == "DELETED" and event["raw_object"]["metadata"]["name"] == "team":
            w.stop()
    assert "team" not in [n.metadata.name for n in core.list_namespace().items]
    assert core.list_secret_for_all_namespaces(field_selector="metadata.namespace=team").items == []
