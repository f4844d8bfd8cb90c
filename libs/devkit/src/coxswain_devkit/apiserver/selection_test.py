"""Label and field selectors: the grammar and its matching rules, and 400s for what is refused.

Covers every label operator (=, ==, !=, in, notin, exists, !exists), set values with spaces,
field selectors on metadata.name, metadata.namespace and Secret `type`, the Event fields
`kubectl describe` selects by (core `involvedObject.*`, events.k8s.io `regarding.*`, a core
Event's `source` being its component), and an unsupported field or an unparsable requirement.
Selectors through the HTTP API are in listing_test.py; `kubectl describe` in
describe_kubectl_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_devkit.apiserver import errors, selection

OBJ = {
    "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web", "tier": "front"}},
    "type": "Opaque",
}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        pytest.param("app=web", True, id="equals"),
        pytest.param("app==web", True, id="double-equals"),
        pytest.param("app=db", False, id="equals-other-value"),
        pytest.param("app!=db", True, id="not-equals"),
        pytest.param("missing!=x", True, id="not-equals-selects-objects-without-the-label"),
        pytest.param("app in (db, web)", True, id="in-with-spaces"),
        pytest.param("app in (db)", False, id="in-without-the-value"),
        pytest.param("app notin (db)", True, id="notin"),
        pytest.param("missing notin (x)", True, id="notin-selects-objects-without-the-label"),
        pytest.param("tier", True, id="exists"),
        pytest.param("!tier", False, id="not-exists-on-present-label"),
        pytest.param("!missing", True, id="not-exists"),
        pytest.param("app=web,tier in (front,back),!missing", True, id="all-requirements-hold"),
        pytest.param("app=web,tier=back", False, id="one-requirement-fails"),
        pytest.param("", True, id="empty-selects-everything"),
    ],
)
def test_label_selector(text: str, selected: bool) -> None:
    selector = selection.parse(text, None, group="", plural="secrets")
    assert selector.matches(OBJ) is selected


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        pytest.param("metadata.name=a", True, id="name"),
        pytest.param("metadata.name!=a", False, id="name-not-equal"),
        pytest.param("metadata.namespace=ns,metadata.name=a", True, id="namespace-and-name"),
        pytest.param("metadata.namespace=other", False, id="other-namespace"),
        pytest.param("type=Opaque", True, id="secret-type"),
        pytest.param("type==kubernetes.io/tls", False, id="other-secret-type"),
    ],
)
def test_field_selector(text: str, selected: bool) -> None:
    assert selection.parse(None, text, group="", plural="secrets").matches(OBJ) is selected


EVENT = {
    "metadata": {"name": "web.1", "namespace": "shop"},
    "involvedObject": {
        "kind": "HTTPRoute",
        "name": "web",
        "namespace": "shop",
        "uid": "u-1",
        "apiVersion": "gateway.networking.k8s.io/v1",
    },
    "reason": "Accepted",
    "type": "Normal",
    "source": {"component": "coxswain-controller"},
}
NEW_EVENT = {
    "metadata": {"name": "web.2", "namespace": "shop"},
    "regarding": {"kind": "HTTPRoute", "name": "web", "namespace": "shop", "uid": "u-1"},
    "reportingController": "coxswain-labs.dev/controller",
    "type": "Warning",
}


@pytest.mark.parametrize(
    ("group", "text", "selected"),
    [
        pytest.param(
            "",
            "involvedObject.name=web,involvedObject.namespace=shop,"
            "involvedObject.kind=HTTPRoute,involvedObject.uid=u-1",
            True,
            id="what-kubectl-describe-sends",
        ),
        pytest.param("", "involvedObject.uid=u-2", False, id="an-object-of-the-same-name-before"),
        pytest.param("", "involvedObject.kind=Service", False, id="another-kind-same-name"),
        pytest.param(
            "", "involvedObject.apiVersion=gateway.networking.k8s.io/v1", True, id="api-version"
        ),
        pytest.param("", "involvedObject.fieldPath=", True, id="unset-field-is-empty"),
        pytest.param("", "source=coxswain-controller", True, id="source-is-the-component"),
        pytest.param("", "reason=Accepted,type!=Warning", True, id="reason-and-type"),
        pytest.param("events.k8s.io", "regarding.uid=u-1", True, id="events-api-regarding"),
        pytest.param(
            "events.k8s.io",
            "reportingController=coxswain-labs.dev/controller,type=Warning",
            True,
            id="events-api-reporting-controller",
        ),
    ],
)
def test_event_field_selector(group: str, text: str, selected: bool) -> None:
    obj = NEW_EVENT if group else EVENT
    assert selection.parse(None, text, group=group, plural="events").matches(obj) is selected


@pytest.mark.parametrize(
    ("labels", "fields", "plural"),
    [
        pytest.param(None, "spec.foo=x", "secrets", id="unsupported-field"),
        pytest.param(None, "type=Opaque", "configmaps", id="type-is-only-for-secrets"),
        pytest.param("app in (x", None, "secrets", id="unclosed-set"),
        pytest.param(None, "metadata.name", "secrets", id="field-without-operator"),
        pytest.param(None, "involvedObject.uid=x", "pods", id="event-fields-are-for-events"),
    ],
)
def test_bad_selectors_are_400(labels: str | None, fields: str | None, plural: str) -> None:
    with pytest.raises(errors.ApiError) as raised:
        selection.parse(labels, fields, group="", plural=plural)
    assert raised.value.code == 400
