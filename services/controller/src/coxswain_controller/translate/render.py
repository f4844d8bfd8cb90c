"""Rendering a `TranslateResult` as plain data: status fragments, compiled routing, Events.

`status_fragment` is what the status writer merges onto a live object (the fields this
controller owns, without lastTransitionTime). `render` shows a whole result as YAML-ready data:
the golden tests compare it and `coxswain-controller translate -f` prints it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from enum import Enum
from typing import Any

from coxswain_controller.translate.result import (
    ClassVerdict,
    Condition,
    GatewayVerdict,
    IngressVerdict,
    ListenerSetVerdict,
    ListenerVerdict,
    PolicyVerdict,
    TranslateResult,
    Verdict,
)
from coxswain_routing import Resource

__all__ = ["render", "status_fragment"]

GATEWAY_GROUP = "gateway.networking.k8s.io"


def _conditions(conditions: tuple[Condition, ...], generation: int) -> list[dict[str, Any]]:
    return [c.to_api(generation) for c in conditions]


def status_fragment(verdict: Verdict, controller_name: str) -> dict[str, Any]:
    """The status fields this controller owns for one object."""
    if isinstance(verdict, ClassVerdict):
        return {
            "conditions": _conditions(verdict.conditions, verdict.generation),
            "supportedFeatures": [{"name": n} for n in verdict.supported_features],
        }
    if isinstance(verdict, IngressVerdict):
        return {"loadBalancer": {"ingress": [_lb_entry(t, v) for t, v in verdict.addresses]}}
    if isinstance(verdict, GatewayVerdict):
        addresses = (
            {}
            if verdict.addresses is None
            else {"addresses": [{"type": t, "value": v} for t, v in verdict.addresses]}
        )
        sets = (
            {}
            if verdict.attached_listener_sets is None
            else {"attachedListenerSets": verdict.attached_listener_sets}
        )
        return {
            **addresses,
            **sets,
            "conditions": _conditions(verdict.conditions, verdict.generation),
            "listeners": _listeners(verdict.listeners, verdict.generation),
        }
    if isinstance(verdict, ListenerSetVerdict):
        return {
            "conditions": _conditions(verdict.conditions, verdict.generation),
            "listeners": _listeners(verdict.listeners, verdict.generation),
        }
    if isinstance(verdict, PolicyVerdict):
        return {
            "ancestors": [
                {
                    "ancestorRef": dict(a.ancestor_ref),
                    "controllerName": controller_name,
                    "conditions": _conditions(a.conditions, verdict.generation),
                }
                for a in verdict.ancestors
            ]
        }
    return {
        "parents": [
            {
                "parentRef": _parent_ref(p.parent_ref),
                "controllerName": controller_name,
                "conditions": _conditions(p.conditions, verdict.generation),
            }
            for p in verdict.parents
        ]
    }


def _listeners(listeners: tuple[ListenerVerdict, ...], generation: int) -> list[dict[str, Any]]:
    return [
        {
            "name": x.name,
            "supportedKinds": [{"group": GATEWAY_GROUP, "kind": k} for k in x.supported_kinds],
            "attachedRoutes": x.attached_routes,
            "conditions": _conditions(x.conditions, generation),
        }
        for x in listeners
    ]


def _lb_entry(kind: str, value: str) -> dict[str, str]:
    return {"ip": value} if kind == "IPAddress" else {"hostname": value}


def _parent_ref(ref: Mapping[str, Any]) -> dict[str, Any]:
    """The parentRef as the route wrote it, with the group and kind the API server would have
    defaulted, so the entry reads the same whether or not the manifest spelled them out."""
    defaults = {"group": GATEWAY_GROUP, "kind": "Gateway"}
    return {**defaults, **{k: v for k, v in ref.items() if v is not None}}


# Fields shown only when set: added after most cases were written, so the cases that leave them
# unset read as they always did.
_SHOWN_WHEN_SET = {
    ("GatewayListeners", "backend_client_certificate"),
    ("Rule", "policy"),
    ("UpstreamTLS", "client_certificate"),
    ("ClientCaStore", "server_name"),
    ("Policy", "client_certificate"),
}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {"kind": type(value).__name__} if _is_filter(value) else {}
        kind = type(value).__name__
        out |= {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) not in (None, "") or (kind, f.name) not in _SHOWN_WHEN_SET
        }
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return (
            f"<{len(value)} bytes sha256:{hashlib.sha256(value).hexdigest()[:16]}>" if value else ""
        )
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _is_filter(value: object) -> bool:
    return type(value).__name__ in {
        "RequestHeaderModifier",
        "ResponseHeaderModifier",
        "URLRewrite",
        "RequestRedirect",
        "RequestMirror",
        "Cors",
    }


def _resource(resource: Resource) -> dict[str, Any]:
    return {"key": resource.key, "type": type(resource).__name__, "spec": _plain(resource)}


def render(result: TranslateResult, controller_name: str) -> dict[str, Any]:
    return {
        "snapshots": {
            str(scope): [_resource(r) for r in resources]
            for scope, resources in sorted(result.snapshots.items(), key=lambda kv: str(kv[0]))
        },
        "status": [
            {
                "object": str(v.ref),
                "generation": v.generation,
                "status": status_fragment(v, controller_name),
            }
            for v in result.verdicts
        ],
        "events": [
            {"object": str(e.ref), "type": e.type, "reason": e.reason, "message": e.message}
            for e in result.events
        ],
        **_provision(result),
        "gatewayIdentities": {
            str(scope): str(identity)
            for scope, identity in sorted(
                result.gateway_identities.items(), key=lambda kv: str(kv[0])
            )
        },
    }


def _provision(result: TranslateResult) -> dict[str, Any]:
    """What each Gateway should have provisioned (only when something is: cases that leave
    provisioning out read as they always did)."""
    if not result.provision:
        return {}
    rendered = []
    for entry in result.provision:
        item: dict[str, Any] = {"gateway": str(entry.gateway), "mode": entry.mode.value}
        if entry.hold:
            item["hold"] = True
        if entry.keep:
            item["keep"] = [str(key) for key in sorted(entry.keep)]
        item["objects"] = [_plain(o.body) for o in entry.objects]
        rendered.append(item)
    return {"provision": rendered}
