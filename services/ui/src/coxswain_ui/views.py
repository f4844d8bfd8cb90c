"""What the pages show, shaped from the controller's JSON: pure functions, no I/O.

The templates stay declarative because the decisions are here: which condition is healthy,
how a match or a parent reads, what the fleet summary counts, how an Explain form becomes the
API's question, and how a manifest becomes YAML (a Secret without its data, even if a
controller ever sent it). The Jinja filters the templates use are registered from `FILTERS`
and `TESTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from coxswain_ui.client import ApiError

__all__ = [
    "FILTERS",
    "KINDS",
    "METHODS",
    "ROUTE_KINDS",
    "TESTS",
    "ErrorView",
    "ExplainForm",
    "error_view",
    "fleet_summary",
    "healthy",
    "manifest_yaml",
]

# Conditions whose True means trouble (as the controller's /api/v1/problems counts them).
NEGATIVE = frozenset({"Conflicted", "OverlappingTLSConfig"})
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute", "Ingress")
KINDS = (
    "Gateway",
    "GatewayClass",
    *ROUTE_KINDS,
    "IngressClass",
    "Service",
    "EndpointSlice",
    "ReferenceGrant",
    "BackendTLSPolicy",
    "Secret",
    "ConfigMap",
)
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE")


def healthy(condition: Mapping[str, Any]) -> bool:
    status = bool(condition.get("status"))
    return not status if condition.get("type") in NEGATIVE else status


def _tf(value: Any) -> str:
    return "True" if value is True else "False" if value is False else str(value)


def _ms(value: Any) -> str:
    if value is None:
        return ""
    number = float(value)
    return f"{number / 1000:.2f} s" if number >= 1000 else f"{number:g} ms"


def object_href(obj: Mapping[str, Any]) -> str:
    kind, ns, name = str(obj.get("kind", "")), str(obj.get("namespace", "")), obj.get("name", "")
    if kind == "Gateway":
        return f"/gateways/{ns}/{name}"
    if kind in ROUTE_KINDS:
        return f"/routes/{kind}/{ns}/{name}"
    return f"/manifests/{kind}/{ns or '_'}/{name}"


def match_text(match: Mapping[str, Any]) -> str:
    """One match as an operator reads it: `PathPrefix /api, method POST, header x=1`."""
    parts = []
    path = match.get("path") or {}
    if path:
        parts.append(f"{path.get('type', '')} {path.get('value', '')}".strip())
    if match.get("method"):
        parts.append(f"method {match['method']}")
    for kind in ("headers", "query"):
        for item in match.get(kind) or []:
            if isinstance(item, Mapping):
                name, value = item.get("name", ""), item.get("value", "")
                how = item.get("type", "Exact")
                parts.append(f"{kind[:-1] if kind == 'headers' else 'query'} {name} {how} {value}")
    return ", ".join(parts) or "everything"


def parent_text(ref: Mapping[str, Any], namespace: str) -> str:
    kind = ref.get("kind", "Gateway")
    text = f"{kind} {ref.get('namespace', namespace)}/{ref.get('name', '')}"
    if ref.get("sectionName"):
        text += f" section {ref['sectionName']}"
    if ref.get("port"):
        text += f" port {ref['port']}"
    return text


def subsystem_text(sub: Mapping[str, Any]) -> str:
    """The detail of one /api/v1/health subsystem, in a line."""
    skip = {"state", "kinds"}
    shown = [f"{k} {v}" for k, v in sub.items() if k not in skip and v not in (None, "", {})]
    kinds = sub.get("kinds")
    if isinstance(kinds, Mapping) and kinds:
        synced = sum(1 for k in kinds.values() if isinstance(k, Mapping) and k.get("synced"))
        shown.append(f"{synced}/{len(kinds)} kinds synced")
    return "; ".join(shown)


FILTERS = {
    "healthy": healthy,
    "tf": _tf,
    "ms": _ms,
    "object_href": object_href,
    "match_text": match_text,
    "parent_text": parent_text,
    "subsystem_text": subsystem_text,
}
TESTS = {"healthy": healthy}


@dataclass(frozen=True)
class FleetSummary:
    connected: int
    up_to_date: int
    behind: int
    nacked: int
    disconnected: int


def fleet_summary(fleet: Mapping[str, Any]) -> FleetSummary:
    proxies = list(fleet.get("proxies") or [])
    up = sum(1 for p in proxies if (p.get("lag") or {}).get("upToDate"))
    return FleetSummary(
        connected=len(proxies),
        up_to_date=up,
        behind=len(proxies) - up,
        nacked=sum(1 for p in proxies if p.get("lastNack")),
        disconnected=len(fleet.get("disconnected") or []),
    )


def manifest_yaml(kind: str, obj: Mapping[str, Any]) -> str:
    shown = dict(obj)
    if kind == "Secret":  # the controller never sends it; never show it if one ever did
        shown.pop("data", None)
        shown.pop("stringData", None)
    return yaml.safe_dump(shown, sort_keys=False, default_flow_style=False)


@dataclass(frozen=True)
class ExplainForm:
    """The Explain form's fields, as typed (re-shown on the page) and as the API's question."""

    gateway: str = ""
    proxy: str = ""
    port: str = ""
    host: str = ""
    method: str = "GET"
    path: str = "/"
    query: str = ""
    headers: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> ExplainForm:
        fields = {k: str(query.get(k, "")).strip() for k in cls.__dataclass_fields__}
        fields["method"] = (fields["method"] or "GET").upper()
        fields["path"] = fields["path"] or "/"
        fields["headers"] = str(query.get("headers", ""))
        return cls(**fields)

    def question(self) -> dict[str, Any]:
        """The body of POST /api/v1/explain; `ValueError` naming what is wrong."""
        if bool(self.gateway) == bool(self.proxy):
            raise ValueError("Choose either a Gateway or a proxy.")
        try:
            port = int(self.port)
        except ValueError:
            raise ValueError("The port must be a number.") from None
        if not 0 < port < 65536:
            raise ValueError("The port must be between 1 and 65535.")
        headers: dict[str, str] = {}
        for number, line in enumerate(self.headers.splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise ValueError(f"Header line {number} is not 'Name: value'.")
            headers[name.strip()] = value.strip()
        target = {"gateway": self.gateway} if self.gateway else {"proxy": self.proxy}
        return {
            **target,
            "port": port,
            "host": self.host,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": headers,
        }


@dataclass(frozen=True)
class ErrorView:
    status: int
    reason: str
    message: str
    headline: str
    advice: str


_ADVICE = {
    401: (
        "The controller did not accept the UI's token.",
        "The token is missing, expired or not one the API server's TokenReview accepts. With "
        "--controller-token-file, check the file; otherwise sign in again.",
    ),
    403: (
        "The controller does not allow this token to read this.",
        "Grant get on the coxswain-labs.dev resource controller-api/<area> (RBAC, with "
        "--api-authorization=sar) or add the user to --api-allowed-users (allowlist).",
    ),
    404: ("Not found.", "The controller does not have what this page asked for."),
    502: (
        "The controller cannot be reached.",
        "Check --controller-url and that the controller is running; this page will work again "
        "once it answers.",
    ),
    503: (
        "The controller cannot answer this right now.",
        "It has no Kubernetes API to check tokens or read from, or the API server is down.",
    ),
}


def error_view(err: ApiError) -> ErrorView:
    headline, advice = _ADVICE.get(
        err.status, ("The controller answered with an error.", "See its message below.")
    )
    return ErrorView(err.status, err.reason, err.message, headline, advice)
