"""An Ingress's policy annotations compiled into each of its rules' `coxswain_routing.Policy`.

Where it sits: `ingresses.stages` loads each Ingress's basic-auth Secret here
(`load_secrets`), so a Secret that is missing or holds no usable entry refuses the Ingress
before any path is lowered; `lowering` then asks `rule_policy` for each rule that serves a path
(redirect rules get none: ingress-nginx answers its redirects before access checks). The auth
Service of `auth-url` is resolved here, as a backend is, so its endpoint set goes into the
snapshot; one that does not resolve leaves the policy naming no endpoints, which the proxy
answers with 500, as nginx answers an auth request it cannot make. An auth-url of `$host`
takes the Service `host_auth` found for the rule's host.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from coxswain_controller.translate.ingress.annotations.access import SELF_HOST
from coxswain_controller.translate.ingress.annotations.policy import ExternalSpec
from coxswain_controller.translate.ingress.annotations.policy import Policy as Annotations
from coxswain_controller.translate.inputs import Inputs, namespace
from coxswain_routing import (
    BasicAuth,
    CookieSplit,
    ExternalAuth,
    Policy,
    RateLimit,
    SessionAffinity,
    SourceRanges,
    hash_scheme,
)

if TYPE_CHECKING:
    from coxswain_controller.translate.backends.resolver import BackendResolver
    from coxswain_controller.translate.ingress.plans import AuthTarget, IngressPlan

__all__ = ["entries", "load_secrets", "rate_limits", "rule_policy"]

AUTH_FILE_KEY = "auth"  # ingress-nginx's auth-file Secrets hold the htpasswd file under "auth"
AUTH_MAP = "auth-map"


def load_secrets(plan: IngressPlan, inputs: Inputs) -> None:
    """Read the basic-auth Secret into `plan.basic`, or refuse the Ingress saying why."""
    spec = plan.policy.basic
    if spec is None:
        return
    ns = namespace(plan.obj)
    secret = inputs.get("Secret", ns, spec.secret)
    if secret is None:
        plan.refusals.append(f"auth-secret {ns}/{spec.secret} not found")
        return
    users = entries(secret.get("data") or {}, spec.secret_type)
    if isinstance(users, str):
        plan.refusals.append(f"auth-secret {ns}/{spec.secret}: {users}")
        return
    plan.basic = BasicAuth(spec.realm, users, f"{ns}/{spec.secret}")


def _decoded(value: object) -> str:
    return base64.b64decode(str(value), validate=True).decode("utf-8")


def entries(data: dict[str, object], secret_type: str) -> tuple[tuple[str, str], ...] | str:
    try:
        if secret_type == AUTH_MAP:
            pairs = [(user, _decoded(value).strip()) for user, value in data.items()]
        elif AUTH_FILE_KEY not in data:
            return f"has no {AUTH_FILE_KEY!r} key"
        else:
            lines = _decoded(data[AUTH_FILE_KEY]).splitlines()
            pairs = [tuple(line.strip().split(":", 1)) for line in lines  # type: ignore[misc]
                     if line.strip() and not line.startswith("#")]  # fmt: skip
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return "its data is not base64 of UTF-8 text"
    found: dict[str, str] = {}
    for pair in pairs:
        if len(pair) != 2 or not pair[0]:
            return "holds a line that is not user:hash"
        user, hashed = pair
        if hash_scheme(hashed) is None:
            return f"user {user!r} has a hash of a scheme not served (bcrypt, apr1 or SHA only)"
        found.setdefault(user, hashed)  # the first line of a user wins, as in htpasswd files
    if not found:
        return "holds no user"
    return tuple(sorted(found.items()))


def rule_policy(
    owner: IngressPlan,
    annotations: Annotations,
    resolver: BackendResolver,
    *,
    cookie_path: str,
    host: str,
    split: CookieSplit | None = None,
) -> tuple[Policy | None, list[str]]:
    """The policy of a rule serving a path of `host` with `annotations` (those of `owner`,
    whose Secret holds the basic-auth users and whose auth targets a `$host` auth-url's), and
    what did not resolve (the auth Service)."""
    ranges = None
    if annotations.allow_ranges or annotations.deny_ranges:
        ranges = SourceRanges(annotations.allow_ranges, annotations.deny_ranges)
    spec = annotations.external
    external: ExternalAuth | None
    if spec is not None and spec.self_scheme:
        external, unresolved = _self_host(spec, owner.auth_targets.get(host), host)
    else:
        external, unresolved = _external(spec, resolver)
    affinity = annotations.affinity
    if affinity is not None and not affinity.path:
        affinity = _with_path(affinity, cookie_path)
    policy = Policy(
        source_ranges=ranges,
        max_body_bytes=annotations.max_body_bytes,
        rate_limits=rate_limits(annotations),
        connections_per_client=annotations.limits.connections,
        basic_auth=owner.basic if annotations.basic is not None else None,
        external_auth=external,
        affinity=affinity,
        cookie_split=split,
        access_log=owner.access_log,
    )
    return (None if policy.empty else policy), unresolved


def _with_path(affinity: SessionAffinity, path: str) -> SessionAffinity:
    from dataclasses import replace

    return replace(affinity, path=path)


def rate_limits(annotations: Annotations) -> tuple[RateLimit, ...]:
    """ingress-nginx's limit_req zones: `rate` per second or minute, a burst of rate times the
    multiplier, keyed by the client's address."""
    limits = annotations.limits
    found = []
    for rate, period in ((limits.rps, 1), (limits.rpm, 60)):
        if rate:
            burst = rate * limits.burst_multiplier
            found.append(RateLimit(rate, period, burst, exempt=limits.exempt))
    return tuple(found)


def _external(
    spec: ExternalSpec | None, resolver: BackendResolver
) -> tuple[ExternalAuth | None, list[str]]:
    if spec is None:
        return None, []
    ref = {"name": spec.service, "port": spec.port}
    # The URL names the Service by DNS, in whatever namespace: nginx reaches it so too.
    resolved = resolver.resolve(ref, route_kind="Ingress", route_namespace=spec.namespace)
    problems = []
    if not resolved.backend.resolved:
        problems.append(f"auth-url: {resolved.backend.unresolved_reason}")
    return _auth(spec, resolved.backend.endpoints, spec.host), problems


def _self_host(
    spec: ExternalSpec, target: AuthTarget | None, host: str
) -> tuple[ExternalAuth, list[str]]:
    """auth-url of $host: nginx's subrequest to it comes back into nginx, whose rules for the
    host send it to `target`'s Service with the request's own Host; it goes there directly.
    No target (the stage that resolves them has not run, `host_auth`): no endpoints."""
    endpoints = target.backend.endpoints if target is not None else ""
    problems = []
    if target is not None and not target.backend.resolved:
        problems.append(f"auth-url: {target.backend.unresolved_reason}")
    return _auth(spec, endpoints, spec.host.replace(SELF_HOST, host, 1)), problems


def _auth(spec: ExternalSpec, endpoints: str, host: str) -> ExternalAuth:
    return ExternalAuth(
        endpoints=endpoints,
        host=host,
        path=spec.target,
        method=spec.method,
        response_headers=spec.response_headers,
        signin=spec.signin,
        signin_redirect_param=spec.redirect_param,
    )
