"""An Ingress path and its policy lowered into model rules, per Ingress port.

Where it sits: after the plans are read, the regex hosts known and the canaries attached, each
served Ingress's paths are lowered here. Each rule is first written as the HTTPRoute rule that
means the same (`httproute_rule`: matches, filters, weighted backendRefs, timeouts) and then
compiled by the HTTPRoute lowering itself (`routes.rules.compile_rules`), so an annotation is
held to every check a route is; the migration report prints the same HTTPRoute rules. Three
things the Gateway API cannot say are applied to the compiled rule after: the Ingress's own
rule identity, a rewrite-target with captures (ReplaceRegexMatch, the model's own), and
backend-protocol (the Gateway API takes a backend's protocol from its Service port).

Per port: the HTTPS port serves the path; the HTTP port serves it too, unless ingress-nginx's
ssl-redirect (a host with a certificate, on by default) or force-ssl-redirect sends it to
HTTPS with a 308, as ingress-nginx's default `http-redirect-code` does. ingress-nginx's
`no-tls-redirect-locations` default, `/.well-known/acme-challenge`, is never redirected, so
ACME HTTP-01 challenges keep working. A permanent or temporal redirect answers on both ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.ingress import policies, regex_hosts
from coxswain_controller.translate.ingress.annotations.policy import Policy
from coxswain_controller.translate.ingress.annotations.values import duration
from coxswain_controller.translate.ingress.canaries import CanaryPath, MainKey, main_key
from coxswain_controller.translate.ingress.plans import IngressPlan, PathPlan, ServiceRef
from coxswain_controller.translate.inputs import created, meta, name, namespace
from coxswain_controller.translate.routes.rules import compile_rules
from coxswain_routing import (
    Backend,
    BackendProtocol,
    CookieSplit,
    PathModifier,
    PathModifierType,
    RouteId,
    Rule,
    UpstreamTLS,
    URLRewrite,
    host_pattern_covers,
)

__all__ = ["Context", "Lowered", "lower"]

# Rule indexes of the rules an Ingress adds besides one per path.
APP_ROOT_INDEX = 999_999  # the app-root redirect of "/", one per host
NEVER_OFFSET = 2_000_000  # + the path's index: canary-by-header "never", to the main only
ACME_CHALLENGES = "/.well-known/acme-challenge"
HTTPS_REDIRECT_CODE = 308
_PROTOCOLS = {
    "HTTP": BackendProtocol.HTTP1,
    "HTTPS": BackendProtocol.HTTP1,
    "H2C": BackendProtocol.H2C,
    "GRPC": BackendProtocol.GRPC,
    "GRPCS": BackendProtocol.GRPC,
}
_TLS_PROTOCOLS = ("HTTPS", "GRPCS")


@dataclass(frozen=True)
class Context:
    """What every Ingress is lowered against."""

    resolver: BackendResolver
    https_port: int  # where the HTTPS redirect sends clients
    patterns: Mapping[tuple[str, str], regex_hosts.Pattern]  # the regex hosts' paths
    certificates: tuple[str, ...]  # every name an Ingress certificate serves
    canaries: Mapping[MainKey, CanaryPath]


@dataclass
class Lowered:
    """One Ingress's rules by (port, host), and why it cannot be served as asked."""

    http: dict[str, list[Rule]] = field(default_factory=dict)
    https: dict[str, list[Rule]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # the Ingress is not served
    unresolved: list[str] = field(default_factory=list)  # served; those slots answer 500

    def add(self, host: str, rules: list[Rule], *, http: list[Rule] | None = None) -> None:
        self.https.setdefault(host, []).extend(rules)
        self.http.setdefault(host, []).extend(rules if http is None else http)


def lower(plan: IngressPlan, ctx: Context) -> Lowered:
    out = Lowered()
    for path in plan.paths:
        served = _served(plan, path, ctx, out)
        if redirects_to_https(plan.policy, path, ctx):
            redirect = _https_redirect(plan, path, ctx)
            out.add(path.host, served, http=[_compile(plan, path.index, redirect, ctx, out)])
        else:
            out.add(path.host, served)
    if plan.policy.app_root:
        for host in sorted({p.host for p in plan.paths if not p.default}):
            raw = app_root_rule(plan.policy.app_root)
            out.add(host, [_compile(plan, APP_ROOT_INDEX, raw, ctx, out, rule_name="app-root")])
    return out


# ---------------------------------------------------------------------------------------------
# The HTTPRoute rules an Ingress path means


def match_path(path: PathPlan, pattern: regex_hosts.Pattern | None) -> dict[str, str]:
    if pattern is not None:
        return {"type": "RegularExpression", "value": pattern.value}
    return {"type": path.type.value, "value": path.value}


def httproute_rule(
    policy: Policy,
    path: PathPlan,
    pattern: regex_hosts.Pattern | None,
    backend_refs: list[dict[str, Any]],
    headers: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The HTTPRoute rule serving `path` as `policy` says, to `backend_refs`."""
    match: dict[str, Any] = {"path": match_path(path, pattern)}
    if headers:
        match["headers"] = headers
    rule: dict[str, Any] = {"matches": [match], "filters": filters(policy, path)}
    if policy.redirect is None:
        rule["backendRefs"] = backend_refs
    if policy.backend_request_ms:
        rule["timeouts"] = {"backendRequest": duration(policy.backend_request_ms // 1000)}
    return rule


def filters(policy: Policy, path: PathPlan) -> list[dict[str, Any]]:
    if policy.redirect is not None:
        return [{"type": "RequestRedirect", "requestRedirect": policy.redirect}]
    found: list[dict[str, Any]] = []
    if policy.cors is not None:
        found.append({"type": "CORS", "cors": policy.cors})
    if policy.forwarded_prefix:
        header = {"name": "X-Forwarded-Prefix", "value": policy.forwarded_prefix}
        found.append({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [header]}})
    rewrite: dict[str, Any] = {}
    if policy.upstream_vhost:
        rewrite["hostname"] = policy.upstream_vhost
    target = rewrite_target(policy, path)
    if target:
        # A target with captures is written as a full path here, checked as one, and becomes
        # the model's ReplaceRegexMatch once compiled (`_regex_rewrite`).
        rewrite["path"] = {"type": "ReplaceFullPath", "replaceFullPath": target}
    if rewrite:
        found.append({"type": "URLRewrite", "urlRewrite": rewrite})
    return found


def rewrite_target(policy: Policy, path: PathPlan) -> str:
    """ingress-nginx's `needsRewrite`: a target other than the path itself."""
    target = policy.rewrite_target
    return target if target and target != path.value else ""


def has_captures(target: str) -> bool:
    return "$" in target


def backend_ref(
    plan: IngressPlan, service: ServiceRef, ctx: Context, weight: int
) -> dict[str, Any]:
    if not service.name:
        return {"group": "unsupported", "kind": "Resource", "name": "", "port": 0, "weight": weight}
    port = service.number
    if port is None:
        port = ctx.resolver.port_number(namespace(plan.obj), service.name, service.port_name)
    return {"name": service.name, "port": port, "weight": weight}


def app_root_rule(root: str) -> dict[str, Any]:
    """ingress-nginx: `if ($uri = /) { return 302 $scheme://$http_host<app-root>; }`."""
    redirect = {"path": {"type": "ReplaceFullPath", "replaceFullPath": root}, "statusCode": 302}
    return {
        "matches": [{"path": {"type": "Exact", "value": "/"}}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
    }


def https_redirect_rule(match: dict[str, str], port: int = 0) -> dict[str, Any]:
    """The HTTP port's rule for a path sent to HTTPS (`port` 0: the scheme's own, 443)."""
    redirect: dict[str, Any] = {"scheme": "https", "statusCode": HTTPS_REDIRECT_CODE}
    if port:
        redirect["port"] = port
    return {
        "matches": [{"path": match}],
        "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}],
    }


# ---------------------------------------------------------------------------------------------
# Compiling them


def _served(plan: IngressPlan, path: PathPlan, ctx: Context, out: Lowered) -> list[Rule]:
    """The path's rules as served: its own, then its canary's header rules, if any."""
    pattern = ctx.patterns.get((path.host, path.value))
    canary = ctx.canaries.get(main_key(plan, path))
    split = canary.plan.policy.canary if canary is not None else None
    refs = [backend_ref(plan, path.backend, ctx, split.total - split.weight if split else 1)]
    cookie = None
    if canary is not None and split is not None and (split.weight or split.cookie):
        # By cookie the canary is a slot of its own, weighted 0 when it takes no share.
        canary_ref = backend_ref(canary.plan, canary.path.backend, ctx, split.weight)
        refs.append(canary_ref)
        if split.cookie:
            cookie = (CookieSplit(split.cookie, always=1, never=0), canary_ref)
    policy = plan.policy
    raw = httproute_rule(policy, path, pattern, refs)
    rules = [_compile(plan, path.index, raw, ctx, out, path, split=cookie)]
    if canary is None or split is None or not split.header or policy.redirect is not None:
        return rules
    to_canary = [backend_ref(canary.plan, canary.path.backend, ctx, 1)]
    by_header = httproute_rule(policy, path, pattern, to_canary, [canary_header(split)])
    rules.append(
        _compile(canary.plan, canary.path.index, by_header, ctx, out, path, policy, main=plan)
    )
    if not split.header_value and not split.header_pattern:
        never = {"name": split.header, "value": "never"}
        to_main = [backend_ref(plan, path.backend, ctx, 1)]
        raw = httproute_rule(policy, path, pattern, to_main, [never])
        index = NEVER_OFFSET + path.index
        rules.append(_compile(plan, index, raw, ctx, out, path, rule_name="canary-never"))
    return rules


def canary_header(split: Any) -> dict[str, str]:
    """The header match sending a request to the canary (ingress-nginx: "always", the
    configured value, or the pattern, found anywhere in the value as PCRE does)."""
    if split.header_pattern:
        pattern = f".*(?:{split.header_pattern}).*"
        return {"name": split.header, "type": "RegularExpression", "value": pattern}
    return {"name": split.header, "value": split.header_value or "always"}


def redirects_to_https(policy: Policy, path: PathPlan, ctx: Context) -> bool:
    if policy.redirect is not None or path.value.startswith(ACME_CHALLENGES):
        return False
    if policy.force_ssl_redirect:
        return True
    has_tls = path.host and any(host_pattern_covers(n, path.host) for n in ctx.certificates)
    return policy.ssl_redirect and bool(has_tls)


def _https_redirect(plan: IngressPlan, path: PathPlan, ctx: Context) -> dict[str, Any]:
    pattern = ctx.patterns.get((path.host, path.value))
    return https_redirect_rule(match_path(path, pattern), ctx.https_port)


def _compile(
    plan: IngressPlan,
    index: int,
    raw: Mapping[str, Any],
    ctx: Context,
    out: Lowered,
    path: PathPlan | None = None,
    policy: Policy | None = None,
    *,
    rule_name: str = "",
    main: IngressPlan | None = None,
    split: tuple[CookieSplit, dict[str, Any]] | None = None,
) -> Rule:
    """`raw` compiled by the HTTPRoute lowering, as the rule `index` of `plan` (`policy`: the
    one its filters came from, when not the plan's own: a canary's rule serves the main's)."""
    route = {"metadata": meta(plan.obj), "spec": {"rules": [raw]}}
    compiled = compile_rules(route, "Ingress", ctx.resolver)
    at = f"rule {rule_name or index}"
    out.refused += [f"{at}: {r.split('.', 1)[-1]}" for r in compiled.refused]
    out.unresolved += [problem for _, problem in compiled.unresolved]
    ident = RouteId(created(plan.obj), namespace(plan.obj), name(plan.obj), "Ingress", index)
    rule = replace(compiled.rules[0], id=replace(ident, rule_name=rule_name))
    policy = policy or plan.policy
    if path is not None:
        pattern = ctx.patterns.get((path.host, path.value))
        rule = _regex_rewrite(rule, rewrite_target(policy, path), pattern)
    if split is not None and len(rule.backends) == 1:
        rule = _zero_weight_slot(rule, plan, split[1], ctx)
    rule = _protocol(rule, policy.protocol, (main or plan).backend_tls, at, out)
    if path is not None and policy.redirect is None:
        rule = _policy(rule, main or plan, policy, path, ctx, out, split and split[0])
    out.refused += [f"{at}.{p.field}: {p.message}" for p in rule.validate()]
    return rule


def _zero_weight_slot(rule: Rule, plan: IngressPlan, ref: dict[str, Any], ctx: Context) -> Rule:
    """The canary's slot of a cookie split that takes no share by weight: the HTTPRoute
    lowering drops a backendRef weighted 0 (it sends nothing), which the cookie still picks."""
    resolved = ctx.resolver.resolve(
        {**ref, "weight": 0}, route_kind="Ingress", route_namespace=namespace(plan.obj)
    )
    return replace(rule, backends=(*rule.backends, resolved.backend))


def _policy(
    rule: Rule,
    owner: IngressPlan,
    policy: Policy,
    path: PathPlan,
    ctx: Context,
    out: Lowered,
    split: CookieSplit | None,
) -> Rule:
    """The rule's access, limits, auth and affinity (`policies`); its redirect rules get none."""
    regex = (path.host, path.value) in ctx.patterns
    cookie_path = "/" if regex or not path.value.startswith("/") else path.value
    found, unresolved = policies.rule_policy(
        owner, policy, ctx.resolver, cookie_path=cookie_path, host=path.host, split=split
    )
    out.unresolved += unresolved
    return rule if found is None else replace(rule, policy=found)


def _regex_rewrite(rule: Rule, target: str, pattern: regex_hosts.Pattern | None) -> Rule:
    """A target with captures as ReplaceRegexMatch, its groups renumbered past the earlier
    paths' (regex_hosts)."""
    if not target or not has_captures(target) or pattern is None:
        return rule
    modifier = PathModifier(
        PathModifierType.REPLACE_REGEX_MATCH, regex_hosts.renumber(target, pattern.offset)
    )
    filters = tuple(
        replace(f, path=modifier) if isinstance(f, URLRewrite) and f.path is not None else f
        for f in rule.filters
    )
    return replace(rule, filters=filters)


def _protocol(rule: Rule, protocol: str, tls: UpstreamTLS | None, at: str, out: Lowered) -> Rule:
    """backend-protocol over what the Service port says. HTTPS and GRPCS need the TLS that
    proxy-ssl-* (`tls`, over a BackendTLSPolicy: the annotations are this Ingress's own say)
    or a BackendTLSPolicy gives: ingress-nginx skips verifying a backend by default, and
    Coxswain never does, so without either the Ingress is refused rather than served
    unverified."""
    if not protocol:
        return rule
    backends = []
    for backend in rule.backends:
        if tls is not None and protocol in _TLS_PROTOCOLS and backend.resolved:
            backend = replace(backend, tls=tls)
        if protocol in _TLS_PROTOCOLS and backend.resolved and backend.tls is None:
            out.refused.append(
                f"{at}: backend-protocol {protocol} is not supported yet without proxy-ssl-* "
                f"or a BackendTLSPolicy saying how to verify "
                f"{backend.endpoints.split('/', 1)[-1]}"
            )
        backends.append(_with_protocol(backend, protocol))
    return replace(rule, backends=tuple(backends))


def _with_protocol(backend: Backend, protocol: str) -> Backend:
    wanted = _PROTOCOLS[protocol]
    if protocol == "HTTP" and backend.protocol is BackendProtocol.WEBSOCKET:
        return backend  # ingress-nginx upgrades WebSockets on HTTP backends too
    return replace(backend, protocol=wanted)
