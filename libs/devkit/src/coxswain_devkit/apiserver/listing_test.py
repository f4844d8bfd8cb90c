"""Lists through the real client: selectors, pages with `limit`/`continue`, reads at a version.

Covers label and field selectors over HTTP (including a 400 for an unsupported field), all
namespaces at once, pages that stay consistent at the first page's resourceVersion while objects
change, `resourceVersionMatch=Exact`, and 410 for a continue token older than the window. The
selector grammar itself is in selection_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiException

from coxswain_devkit.apiserver.conftest import TEST_WINDOW


def _names(listed: Any) -> list[str]:
    return [o.metadata.name for o in listed.items]


@pytest.fixture
def seeded(core: Any) -> Any:
    for name, tier in (("a", "front"), ("b", "back"), ("c", "front")):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": name, "labels": {"tier": tier}}}
        )
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_config_map(
        "other", {"metadata": {"name": "d", "labels": {"tier": "db"}}}
    )
    core.create_namespaced_secret(
        "default", {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls"}
    )
    core.create_namespaced_secret("default", {"metadata": {"name": "plain"}, "type": "Opaque"})
    return core


@pytest.mark.parametrize(
    ("labels", "fields", "names"),
    [
        pytest.param("tier=front", None, ["a", "c"], id="label-equals"),
        pytest.param("tier notin (front)", None, ["b"], id="label-notin"),
        pytest.param(None, "metadata.name=b", ["b"], id="field-name"),
        pytest.param("tier", "metadata.name!=a", ["b", "c"], id="label-exists-and-field-not-equal"),
    ],
)
def test_list_with_selectors(
    seeded: Any, labels: str | None, fields: str | None, names: list[str]
) -> None:
    kwargs = {k: v for k, v in (("label_selector", labels), ("field_selector", fields)) if v}
    assert _names(seeded.list_namespaced_config_map("default", **kwargs)) == names


def test_secret_type_field_selector_and_unsupported_fields(seeded: Any) -> None:
    assert _names(
        seeded.list_namespaced_secret("default", field_selector="type=kubernetes.io/tls")
    ) == ["tls"]
    with pytest.raises(ApiException) as raised:
        seeded.list_namespaced_config_map("default", field_selector="data.x=1")
    assert raised.value.status == 400


def test_list_across_namespaces(seeded: Any) -> None:
    listed = seeded.list_config_map_for_all_namespaces()
    assert [(o.metadata.namespace, o.metadata.name) for o in listed.items] == [
        ("default", "a"),
        ("default", "b"),
        ("default", "c"),
        ("other", "d"),
    ]


def test_pages_stay_at_the_first_pages_resource_version(seeded: Any) -> None:
    first = seeded.list_namespaced_config_map("default", limit=2)
    assert _names(first) == ["a", "b"]
    assert first.metadata.remaining_item_count == 1
    seeded.delete_namespaced_config_map("c", "default")
    seeded.create_namespaced_config_map("default", {"metadata": {"name": "bb"}})
    second = seeded.list_namespaced_config_map(
        "default", limit=2, _continue=first.metadata._continue
    )
    assert _names(second) == ["c"], "the deleted object is still there at the first page's version"
    assert second.metadata.resource_version == first.metadata.resource_version
    assert second.metadata._continue is None


def test_list_at_an_exact_resource_version(seeded: Any) -> None:
    rv = seeded.list_namespaced_config_map("default").metadata.resource_version
    seeded.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"tier": "back"}}})
    then = seeded.list_namespaced_config_map(
        "default", resource_version=rv, resource_version_match="Exact"
    )
    assert then.items[0].metadata.labels == {"tier": "front"}


def test_a_continue_token_past_the_window_is_410(seeded: Any) -> None:
    first = seeded.list_namespaced_config_map("default", limit=1)
    for i in range(TEST_WINDOW + 1):
        seeded.patch_namespaced_config_map("a", "default", {"data": {"i": str(i)}})
    with pytest.raises(ApiException) as raised:
        seeded.list_namespaced_config_map("default", limit=1, _continue=first.metadata._continue)
    assert raised.value.status == 410
