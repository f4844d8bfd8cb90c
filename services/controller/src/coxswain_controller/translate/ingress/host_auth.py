"""auth-url of `$host`: each host's auth path resolved, when translating, to the Service the
Ingress path serving it there sends it to.

ingress-nginx's own oauth2-proxy example (docs/examples/auth/oauth-external-auth) writes
`auth-url: "https://$host/oauth2/auth"`, with a second Ingress on the same host serving
`/oauth2` from the oauth2-proxy Service. nginx's auth subrequest to that URL comes back into
nginx itself: the host's Ingress rules route it to the Service, and it arrives there with the
request's Host. Coxswain skips the hop through itself and its TLS: per host of the Ingress, it
finds the path as its matcher would route a request to that host and path (a `Router` compiled
from the lowered rules of the Ingresses of the same class: Exact before the longest Prefix or
ImplementationSpecific, regex hosts, the older Ingress on a tie; the https port's rules for an
https URL, the http port's for http), and sends the auth request straight to that path's
Service, with the request's host as its Host.

Where it sits: `refusal` runs as each Ingress is read (a path with no host, or on a wildcard
host, has no one host to resolve: $host is each request's own there); `resolve` runs after every
served Ingress is lowered once, fills `IngressPlan.auth_targets`, or refuses the Ingress; the
Ingresses asking are then lowered again with their targets (`ingresses.lower_all`).

"A value that cannot be honoured makes that Ingress path not served rather than served wrong":
what nginx's second pass would do to the auth request beyond reaching the Service, the direct
request would skip, so such a path refuses the Ingress asking, naming the host and the path —
no Ingress of the class serving it; a path answering it with a redirect (ssl-redirect for an
http URL on a host with a certificate, permanent-redirect), changing it (rewrite-target,
upstream-vhost, x-forwarded-prefix) or splitting it (a canary); one checking it with an auth,
source ranges or limits of its own (nginx would check the subrequest, itself its client); a
backend that is not a Service spoken to as plain HTTP. The path's CORS, timeouts, body size,
affinity and access log have no say over an auth request and are not applied to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coxswain_controller.translate.ingress import lowering
from coxswain_controller.translate.ingress.plans import AuthTarget, IngressPlan, PathPlan
from coxswain_routing import (
    BackendProtocol,
    Cors,
    HostRoutes,
    Miss,
    Policy,
    RequestRedirect,
    Router,
    Rule,
    WildcardScope,
    compile_router,
)

__all__ = ["asks", "refusal", "resolve"]

# The ports of the Router built here, by the URL's scheme (it never leaves this module).
_PORTS = {"http": 80, "https": 443}
_PLAIN = (BackendProtocol.HTTP1, BackendProtocol.WEBSOCKET)
# What of a path's policy would check the auth request in nginx's second pass.
_CHECKS = (
    ("source_ranges", "source ranges"),
    ("rate_limits", "rate limits"),
    ("connections_per_client", "limit-connections"),
    ("basic_auth", "basic auth"),
    ("external_auth", "an auth-url"),
)


def asks(plan: IngressPlan) -> bool:
    """Whether the Ingress is served with an auth-url of $host (a canary's is its main's)."""
    spec = plan.policy.external
    return spec is not None and bool(spec.self_scheme) and not plan.canary


def refusal(plan: IngressPlan) -> str | None:
    """Why an Ingress asking cannot be resolved host by host, before anything is lowered."""
    if not asks(plan) or plan.policy.passthrough:
        return None
    for path in plan.paths:
        if not path.host or path.host.startswith("*."):
            where = f"on the wildcard host {path.host}" if path.host else "with no host"
            return (
                f"auth-url names $host, and the path {path.value!r} is {where}: $host is each "
                "request's own there, so the path serving the auth request is not known "
                "before the request"
            )
    return None


def resolve(plans: Sequence[IngressPlan], lowered: Sequence[object], ctx: lowering.Context) -> bool:
    """Each asking Ingress's target per host into its `auth_targets`, or a refusal into its
    `refusals`; False when none asks (nothing was done)."""
    asking = [p for p in plans if asks(p) and p.served]
    if not asking:
        return False
    owners = {(p.ref.namespace, p.ref.name): p for p in plans}
    routers: dict[str, Router] = {}
    for plan in asking:
        if plan.class_name not in routers:
            routers[plan.class_name] = _router(plans, lowered, plan.class_name)
        for host in sorted({p.host for p in plan.paths}):
            found = _target(plan, host, routers[plan.class_name], owners, ctx)
            if isinstance(found, str):
                plan.refusals.append(found)
                plan.auth_targets.clear()
                break
            plan.auth_targets[host] = found
    return True


def _router(plans: Sequence[IngressPlan], lowered: Sequence[object], class_name: str) -> Router:
    """The served rules of the class's Ingresses, as its ports' tables hold them."""
    resources = []
    for plan, low in zip(plans, lowered, strict=True):
        if plan.class_name != class_name or not isinstance(low, lowering.Lowered) or low.refused:
            continue
        for scheme, by_host in (("http", low.http), ("https", low.https)):
            resources += [_routes(_PORTS[scheme], host, rules) for host, rules in by_host.items()]
    return compile_router(resources)


def _routes(port: int, host: str, rules: Sequence[Rule]) -> HostRoutes:
    return HostRoutes("ingress", port, host, tuple(rules), wildcard_scope=WildcardScope.ONE_LABEL)


def _target(
    plan: IngressPlan,
    host: str,
    router: Router,
    owners: Mapping[tuple[str, str], IngressPlan],
    ctx: lowering.Context,
) -> AuthTarget | str:
    """The auth request's target on `host`, or why it has none (the Ingress's refusal)."""
    spec = plan.policy.external
    assert spec is not None  # `asks`
    path, _, query = spec.target.partition("?")
    where = f"{spec.self_scheme}://{host}{path}"
    outcome = router.match(_PORTS[spec.self_scheme], host, spec.method, path, {}, query)
    if isinstance(outcome, Miss):
        return f"auth-url: no Ingress of class {plan.class_name} serves {where}"
    rule = outcome.rule
    owner = owners.get((rule.id.namespace, rule.id.name))
    if owner is plan:
        return (
            f"auth-url: {where} is served by this Ingress itself, whose auth would check its "
            "own auth request (nginx's subrequest loops); serve the path from an Ingress without "
            "auth-url, as ingress-nginx's oauth2-proxy example does"
        )
    served = _path(owner, rule)
    why = _difference(rule, served)
    if why is not None or owner is None or served is None:
        return (
            f"auth-url: {where} is served by Ingress {rule.id.namespace}/{rule.id.name}, "
            f"which {why}; the auth request, sent straight to a Service, would skip that"
        )
    port = lowering.backend_ref(owner, served.backend, ctx, 1)["port"]
    via = f"{owner.ref.namespace}/{owner.ref.name}"
    return AuthTarget(rule.backends[0], served.backend.name, port, owner.ref.namespace, via)


def _path(owner: IngressPlan | None, rule: Rule) -> PathPlan | None:
    """The Ingress path `rule` serves; None for a rule an annotation adds (app-root, a
    canary's header rules)."""
    if owner is None or rule.id.rule_name:
        return None
    return next((p for p in owner.paths if p.index == rule.id.rule_index), None)


def _difference(rule: Rule, path: PathPlan | None) -> str | None:
    """What nginx's pass through the path would do to the auth request beyond sending it to a
    Service as plain HTTP; None when nothing."""
    if path is None:
        return "serves it with a rule an annotation adds (app-root, a canary's header match)"
    if any(isinstance(f, RequestRedirect) for f in rule.filters):
        return "answers it with a redirect (ssl-redirect to https, or a redirect annotation)"
    if any(not isinstance(f, Cors) for f in rule.filters):
        return "changes it (rewrite-target, upstream-vhost or x-forwarded-prefix)"
    if not path.backend.name:
        return "sends it to a backend that is not a Service"
    if len(rule.backends) != 1:
        return "splits it with a canary"
    checks = _checks(rule.policy)
    if checks:
        return f"checks it with {' and '.join(checks)} of its own"
    backend = rule.backends[0]
    if backend.tls is not None or backend.protocol not in _PLAIN or backend.filters:
        return (
            "does not send it to its Service as plain HTTP (backend-protocol, proxy-ssl-* or "
            "the Service port's appProtocol)"
        )
    return None


def _checks(policy: Policy | None) -> list[str]:
    if policy is None:
        return []
    return [said for field, said in _CHECKS if getattr(policy, field) not in (None, 0, ())]
