"""The migration report's CoxswainPolicy: an Ingress's policy annotations as the CRD says them.

Where it sits: `report` asks `policy_manifest` for each served Ingress that is not a canary,
with the HTTPRoutes it reports for it; the policy targets every one of them (GEP-713 direct
attachment, in the Ingress's namespace). Each field is what translate/policies/coxswain.py
reads into the same `coxswain_routing.Policy` the annotation gives an Ingress path (the rate
limits through `policies.rate_limits`, the very rule the Ingress stage uses), so the routes and
the policy applied beside a Gateway serve what the Ingress serves; report_test translates both
and compares the compiled policies. What the CRD cannot say comes back as notes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from coxswain_controller.translate.ingress import policies
from coxswain_controller.translate.ingress.annotations.policy import ExternalSpec
from coxswain_controller.translate.ingress.plans import IngressPlan
from coxswain_controller.translate.policies import coxswain
from coxswain_routing import RateKey, SessionAffinity

__all__ = ["policy_manifest"]

API_VERSION = "coxswain-labs.dev/v1alpha1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
_PER = {1: "Second", 60: "Minute"}
_KEY = {RateKey.CLIENT_ADDRESS: "ClientAddress", RateKey.ROUTE: "Route"}


def policy_manifest(
    plan: IngressPlan, routes: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, list[str]]:
    """The CoxswainPolicy giving `routes` the Ingress's policy (None when it asks for none),
    and notes on what it cannot carry."""
    if not routes:
        return None, []  # not served, or a canary: its main's routes say it
    body, notes = _spec(plan)
    if not body:
        return None, notes
    targets = [
        {"group": GATEWAY_GROUP, "kind": "HTTPRoute", "name": r["metadata"]["name"]} for r in routes
    ]
    manifest = {
        "apiVersion": API_VERSION,
        "kind": coxswain.KIND,
        "metadata": {"name": plan.ref.name, "namespace": plan.ref.namespace},
        "spec": {"targetRefs": targets, **body},
    }
    return manifest, notes


def _spec(plan: IngressPlan) -> tuple[dict[str, Any], list[str]]:
    policy, notes = plan.policy, []
    body: dict[str, Any] = {}
    ranges = {k: list(v) for k, v in (("allow", policy.allow_ranges), ("deny", policy.deny_ranges))}
    if any(ranges.values()):
        body["sourceRanges"] = {k: v for k, v in ranges.items() if v}
    if policy.max_body_bytes:
        body["maxBodyBytes"] = policy.max_body_bytes
    limits = [_rate(limit) for limit in policies.rate_limits(policy)]
    if limits:
        body["rateLimits"] = limits
    if policy.limits.connections:
        body["connectionsPerClient"] = policy.limits.connections
    if policy.basic is not None:
        basic = policy.basic
        body["basicAuth"] = {"secretRef": {"name": basic.secret}, "secretType": basic.secret_type,
                             "realm": basic.realm}  # fmt: skip
    if policy.external is not None:
        external, note = _external(_named(policy.external, plan), plan.ref.namespace)
        body.update(external)
        notes += note
    if policy.affinity is not None:
        affinity, note = _affinity(policy.affinity, plan)
        body["sessionAffinity"] = affinity
        notes += note
    if plan.access_log:
        body["accessLog"] = True
    return body, notes


def _rate(limit: Any) -> dict[str, Any]:
    found = {"requests": limit.requests, "per": _PER[limit.period_seconds], "burst": limit.burst,
             "key": _KEY[limit.key]}  # fmt: skip
    if limit.exempt:
        found["exempt"] = list(limit.exempt)
    return found


def _named(spec: ExternalSpec, plan: IngressPlan) -> ExternalSpec | str:
    """auth-url as a Service: a $host one's is the Service its hosts' auth path is served
    from (`host_auth`), when they all agree; else why no policy carries it."""
    if not spec.self_scheme:
        return spec
    targets = {(t.service, t.namespace, t.port) for t in plan.auth_targets.values()}
    if len(targets) != 1:
        return (
            "auth-url names $host, and the hosts of the Ingress serve its path from different "
            "Services: one CoxswainPolicy names one; keep this Ingress serving its paths "
            "meanwhile, or write one policy per HTTPRoute"
        )
    [(service, namespace, port)] = targets
    return replace(spec, service=service, namespace=namespace, port=port)


def _external(spec: ExternalSpec | str, namespace: str) -> tuple[dict[str, Any], list[str]]:
    if isinstance(spec, str):
        return {}, [spec]
    if spec.namespace and spec.namespace != namespace:
        note = (
            f"auth-url names a Service of namespace {spec.namespace}: a CoxswainPolicy's "
            "externalAuth reaches its own namespace's only, so no CoxswainPolicy here carries "
            "it; keep this Ingress serving its paths meanwhile"
        )
        return {}, [note]
    found: dict[str, Any] = {
        "backendRef": {"name": spec.service, "port": spec.port},
        "path": spec.target,
        "method": spec.method,
    }
    if spec.response_headers:
        found["responseHeaders"] = list(spec.response_headers)
    if spec.signin:
        found["signinURL"] = spec.signin
        found["signinRedirectParam"] = spec.redirect_param
    notes = []
    if spec.self_scheme:
        notes.append(
            f"auth-url names $host: its path {spec.target.split('?', 1)[0]} is served from "
            f"Service {spec.service}:{spec.port}, which the policy's externalAuth names; the auth "
            "request's Host is then the Service's name rather than the request's host"
        )
    return {"externalAuth": found}, notes


def _affinity(affinity: SessionAffinity, plan: IngressPlan) -> tuple[dict[str, Any], list[str]]:
    found: dict[str, Any] = {"cookieName": affinity.cookie}
    notes = []
    path = affinity.path
    if not path:
        # ingress-nginx's cookie path is each location's own (lowering's cookie_path); one
        # policy has one.
        values = sorted({p.value for p in plan.paths})
        own = len(values) == 1 and values[0].startswith("/") and not plan.policy.regex
        path = values[0] if own else "/"
        if len(values) > 1:
            notes.append("session-cookie-path: each path's own in ingress-nginx; the policy sets /")
    found["path"] = path
    if affinity.max_age_seconds:
        found["maxAgeSeconds"] = affinity.max_age_seconds
    if affinity.expires_seconds:
        found["expiresSeconds"] = affinity.expires_seconds
    if affinity.same_site.value:
        found["sameSite"] = affinity.same_site.value
    if affinity.secure:
        found["secure"] = True
    return found, notes
