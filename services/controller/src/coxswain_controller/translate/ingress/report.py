"""The migration report: each Ingress's annotations and their fates, and its HTTPRoutes.

Where it sits: `coxswain-controller translate -f FILE --migration-report` runs it over
manifests, offline, and the controller API's `/api/v1/migration/ingresses` over the watch cache
(api/migration.py). It reads every Ingress in them, whichever class it names: one whose class is
not Coxswain's is read as if it were (that is the question a migration asks), under a class of
no parameters. It runs the same stages translation does (`ingresses.stages`, `lowering`) and
the translation itself, so what it says an Ingress gets is what Coxswain would serve.

For each Ingress: every ingress-nginx annotation with its fate (honoured, ignored or refused,
and why), whether Coxswain would serve it, and — when it would — the Gateway API HTTPRoutes
meaning the same: one per host, attached to `--report-gateway`; where ssl-redirect applies, one
per listener (`https` serving the paths, `http` answering them with the redirect); a canary's
split folded into its main's route; and the CoxswainPolicy targeting those routes with what no
Gateway API filter says (source ranges, body size, limits, basic and external auth, affinity:
`report_policies`). What neither can say is listed under `notes` rather than dropped silently:
a rewrite-target with captures, backend-protocol, regex paths' ordering, canary-by-cookie.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.ingress import lowering, report_policies, report_tls
from coxswain_controller.translate.ingress.annotations.catalog import PREFIX
from coxswain_controller.translate.ingress.canaries import main_key
from coxswain_controller.translate.ingress.ingresses import (
    LEGACY_ANNOTATION,
    Stages,
    lower_all,
    stages,
)
from coxswain_controller.translate.ingress.plans import IngressPlan, PathPlan
from coxswain_controller.translate.inputs import Inputs, Obj, Options, meta, name, namespace, spec
from coxswain_controller.translate.pipeline import translate
from coxswain_controller.translate.result import Event
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import HostRoutes, StreamRoute

__all__ = ["REPORT_CLASS", "migration_report", "render_report"]

# The class an Ingress of another controller is read under.
REPORT_CLASS = "coxswain-migration-report"
GATEWAY_API = "gateway.networking.k8s.io/v1"
_PROTOCOL_NOTES = {
    "H2C": "backend-protocol H2C: give the Service port appProtocol kubernetes.io/h2c",
    "GRPC": "backend-protocol GRPC: serve it with a GRPCRoute, or give the Service port "
    "appProtocol kubernetes.io/h2c",
    "GRPCS": "backend-protocol GRPCS: a GRPCRoute, with a BackendTLSPolicy on the Service",
    "HTTPS": "backend-protocol HTTPS: a BackendTLSPolicy on the Service says how to verify it",
}
# With proxy-ssl-*, the BackendTLSPolicy is in the report (`report_tls`).
_PROTOCOL_TLS_NOTES = {
    "GRPCS": "backend-protocol GRPCS: a GRPCRoute, with the BackendTLSPolicy below",
    "HTTPS": "backend-protocol HTTPS: the BackendTLSPolicy below says how to verify it",
}


def migration_report(
    documents: Iterable[Any], options: Options, *, gateway: tuple[str, str] = ("", "gateway")
) -> list[dict[str, Any]]:
    """One entry per Ingress in `documents`, by namespace and name."""
    objects = [d for d in documents if isinstance(d, dict)]
    classes = _foreign_classes(objects, options)
    inputs = Inputs.from_objects([_as_ours(o, classes) for o in objects] + _report_class(options))
    found = stages(inputs, options, [])
    result = translate(inputs, options)
    served = _served_ingresses(result.snapshots.get(SHARED_POOL, ()))
    ctx = found.context(BackendResolver(inputs, Grants(inputs)), options)
    lower_all(found, ctx)  # for the auth targets of an auth-url of $host (`host_auth`)
    entries = []
    for plan in sorted(found.plans, key=lambda p: (p.ref.namespace, p.ref.name)):
        original = _original_class(plan, classes)
        entries.append(_entry(plan, original, found, ctx, served, result.events, gateway))
    return entries


def render_report(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "# no Ingress in the manifests\n"
    return yaml.safe_dump_all(entries, sort_keys=False, width=100)


# ---------------------------------------------------------------------------------------------
# Reading every Ingress as Coxswain's


def _foreign_classes(objects: Sequence[Obj], options: Options) -> dict[tuple[str, str], str]:
    """(namespace, name) of each Ingress no class of ours claims -> the class it names."""
    ours = {
        name(o)
        for o in objects
        if o.get("kind") == "IngressClass"
        and spec(o).get("controller") == options.ingress_controller
    }
    default_ours = any(
        name(o) in ours
        and (meta(o).get("annotations") or {}).get("ingressclass.kubernetes.io/is-default-class")
        == "true"
        for o in objects
        if o.get("kind") == "IngressClass"
    )
    foreign = {}
    for obj in objects:
        if obj.get("kind") != "Ingress":
            continue
        named = str(spec(obj).get("ingressClassName") or "")
        named = named or str((meta(obj).get("annotations") or {}).get(LEGACY_ANNOTATION) or "")
        if named in ours or (not named and default_ours):
            continue
        foreign[(namespace(obj), name(obj))] = named
    return foreign


def _as_ours(obj: Obj, foreign: Mapping[tuple[str, str], str]) -> Obj:
    if obj.get("kind") != "Ingress" or (namespace(obj), name(obj)) not in foreign:
        return obj
    copied = copy.deepcopy(dict(obj))
    copied.setdefault("spec", {})["ingressClassName"] = REPORT_CLASS
    return copied


def _report_class(options: Options) -> list[Obj]:
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": REPORT_CLASS},
            "spec": {"controller": options.ingress_controller},
        }
    ]


def _original_class(plan: IngressPlan, foreign: Mapping[tuple[str, str], str]) -> str:
    key = (plan.ref.namespace, plan.ref.name)
    if key in foreign:
        return f"{foreign[key] or '(none)'} (not Coxswain's: read as if it were)"
    return plan.class_name


def _served_ingresses(resources: Iterable[Any]) -> set[tuple[str, str]]:
    """Every Ingress with a rule served, or a host passed through (ssl-passthrough)."""
    found = set()
    for resource in resources:
        if isinstance(resource, HostRoutes) and resource.table == "ingress":
            ids = [rule.id for rule in resource.rules]
        elif isinstance(resource, StreamRoute):
            ids = [match.id for match in resource.matches]
        else:
            continue
        found |= {(i.namespace, i.name) for i in ids if i.kind == "Ingress"}
    return found


# ---------------------------------------------------------------------------------------------
# One Ingress


def _entry(
    plan: IngressPlan,
    ingress_class: str,
    found: Stages,
    ctx: lowering.Context,
    served_set: set[tuple[str, str]],
    events: Iterable[Event],
    gateway: tuple[str, str],
) -> dict[str, Any]:
    key = (plan.ref.namespace, plan.ref.name)
    attached = any(c.plan is plan for c in found.canaries.values())
    served = plan.served and (attached if plan.canary else key in served_set)
    entry: dict[str, Any] = {
        "ingress": f"{plan.ref.namespace}/{plan.ref.name}",
        "ingressClass": ingress_class,
        "served": served,
        "annotations": [_annotation(v) for v in plan.policy.verdicts],
    }
    problems = [
        e.message
        for e in events
        if e.ref == plan.ref and not e.message.startswith(PREFIX) and e.type == "Warning"
    ]
    if problems:
        entry["problems"] = problems
    notes = _notes(plan, found, ctx)
    if plan.canary and served:
        notes.append("a canary: its split is in its main Ingress's HTTPRoutes")
    http = served and not plan.canary and not plan.policy.passthrough
    routes = _routes(plan, ctx, gateway) if http else []
    policy, said = report_policies.policy_manifest(plan, routes)
    if policy is not None and any(p.startswith("auth-url:") for p in problems):
        # Where the Ingress answers 500, a CoxswainPolicy that cannot be honoured attaches
        # nothing: the routes would serve without their auth.
        said.append(
            "the CoxswainPolicy's externalAuth names a Service that is not found, and a policy "
            "that cannot be honoured attaches nothing: apply these routes once it exists"
        )
    manifests, tls_notes = report_tls.tls_part(plan, ctx, gateway) if served else ({}, [])
    if notes + said + tls_notes:
        entry["notes"] = notes + said + tls_notes
    if routes:
        entry["httpRoutes"] = routes
    if policy is not None:
        entry["coxswainPolicies"] = [policy]
    entry.update(manifests)
    return entry


def _annotation(verdict: Any) -> dict[str, str]:
    found = {"key": verdict.key, "value": verdict.value, "fate": str(verdict.fate)}
    found["note"] = verdict.note
    if verdict.origin:
        found["from"] = f"IngressClass {verdict.origin} defaultAnnotations"
    return found


def _notes(plan: IngressPlan, found: Stages, ctx: lowering.Context) -> list[str]:
    notes = []
    policy = plan.policy
    said = {v.key for v in policy.verdicts}
    redirected = any(lowering.redirects_to_https(policy, p, ctx) for p in plan.paths)
    if redirected and PREFIX + "ssl-redirect" not in said and not policy.force_ssl_redirect:
        notes.append(
            "ssl-redirect is on by default for a host with a certificate (as in ingress-nginx): "
            "HTTP is answered 308 to HTTPS"
        )
    for secret, _ in plan.tls:
        notes.append(
            f"TLS: the Gateway's https listener serves Secret {plan.ref.namespace}/{secret} "
            "(a certificateRef; a ReferenceGrant when the Gateway is in another namespace)"
        )
    if any(lowering.has_captures(lowering.rewrite_target(policy, p)) for p in plan.paths):
        notes.append(
            "rewrite-target with captures ($1..$9) has no Gateway API filter: the HTTPRoute "
            "below leaves the path as it is; keep this Ingress serving it (Coxswain serves it "
            "as ReplaceRegexMatch)"
        )
    if policy.protocol and policy.protocol != "HTTP":
        tls_notes = _PROTOCOL_TLS_NOTES if policy.backend_tls is not None else {}
        notes.append(tls_notes.get(policy.protocol) or _PROTOCOL_NOTES[policy.protocol])
    if policy.canary is not None and policy.canary.cookie:
        notes.append(
            "canary-by-cookie has no Gateway API filter nor CoxswainPolicy field: the main's "
            "HTTPRoute serves without it; keep these Ingresses serving their paths meanwhile"
        )
    if any((p.host, p.value) in found.patterns for p in plan.paths):
        notes.append(
            "regex host: each path is a case-insensitive regex guarded by the host's longer "
            "paths (ingress-nginx's order); a Gateway API implementation may order regexes "
            "otherwise"
        )
    return notes


def _routes(
    plan: IngressPlan, ctx: lowering.Context, gateway: tuple[str, str]
) -> list[dict[str, Any]]:
    """One HTTPRoute per host; where ssl-redirect applies, one per listener: `https` serves
    the paths, `http` answers the redirected ones 308 and serves the rest (ACME challenges)."""
    hosts: dict[str, list[PathPlan]] = {}
    for path in plan.paths:
        hosts.setdefault(path.host, []).append(path)
    routes = []
    for i, (host, paths) in enumerate(sorted(hosts.items())):
        base = plan.ref.name if len(hosts) == 1 else f"{plan.ref.name}-{i}"
        first = (
            [lowering.app_root_rule(plan.policy.app_root)] if plan.policy.app_root and host else []
        )
        served = first + [r for path in paths for r in _rules(plan, path, ctx)]
        if not any(lowering.redirects_to_https(plan.policy, p, ctx) for p in paths):
            routes.append(_route(plan, base, host, served, gateway, ""))
            continue
        plain = first + [r for path in paths for r in _http_rules(plan, path, ctx)]
        routes.append(_route(plan, f"{base}-http", host, plain, gateway, "http"))
        routes.append(_route(plan, base, host, served, gateway, "https"))
    return routes


def _http_rules(plan: IngressPlan, path: PathPlan, ctx: lowering.Context) -> list[dict[str, Any]]:
    if not lowering.redirects_to_https(plan.policy, path, ctx):
        return _rules(plan, path, ctx)
    match = lowering.match_path(path, ctx.patterns.get((path.host, path.value)))
    return [lowering.https_redirect_rule(match)]


def _rules(plan: IngressPlan, path: PathPlan, ctx: lowering.Context) -> list[dict[str, Any]]:
    """The path's HTTPRoute rules: the canary's header rules first (more header matches take
    precedence anyway), then the path's own, weighted when a canary splits it."""
    pattern = ctx.patterns.get((path.host, path.value))
    policy = plan.policy
    canary = ctx.canaries.get(main_key(plan, path))
    split = canary.plan.policy.canary if canary is not None else None
    weight = split.total - split.weight if split is not None else 1
    refs = [lowering.backend_ref(plan, path.backend, ctx, weight)]
    if canary is not None and split is not None and split.weight:
        refs.append(lowering.backend_ref(canary.plan, canary.path.backend, ctx, split.weight))
    rules = []
    if canary is not None and split is not None and split.header and policy.redirect is None:
        to_canary = [lowering.backend_ref(canary.plan, canary.path.backend, ctx, 1)]
        header = lowering.canary_header(split)
        rules.append(lowering.httproute_rule(policy, path, pattern, to_canary, [header]))
        if not split.header_value and not split.header_pattern:
            to_main = [lowering.backend_ref(plan, path.backend, ctx, 1)]
            never = {"name": split.header, "value": "never"}
            rules.append(lowering.httproute_rule(policy, path, pattern, to_main, [never]))
    rules.append(lowering.httproute_rule(policy, path, pattern, refs))
    return [_portable(rule) for rule in rules]


def _portable(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule as the Gateway API says it: a rewrite with captures, which it cannot say, is
    left out (the report's notes say so); empty filters and a lone backendRef's weight go."""
    filters = []
    for flt in rule.get("filters") or []:
        rewrite = flt.get("urlRewrite")
        path = (rewrite or {}).get("path") or {}
        if rewrite is not None and lowering.has_captures(path.get("replaceFullPath", "")):
            rewrite = {k: v for k, v in rewrite.items() if k != "path"}
            if not rewrite:
                continue
            flt = {"type": "URLRewrite", "urlRewrite": rewrite}
        filters.append(flt)
    refs = rule.get("backendRefs")
    if refs is not None and len(refs) == 1:
        refs = [{k: v for k, v in refs[0].items() if k != "weight"}]
    out: dict[str, Any] = {"matches": rule["matches"]}
    if filters:
        out["filters"] = filters
    if refs is not None:
        out["backendRefs"] = refs
    if "timeouts" in rule:
        out["timeouts"] = rule["timeouts"]
    return out


def _route(
    plan: IngressPlan,
    route_name: str,
    host: str,
    rules: list[dict[str, Any]],
    gateway: tuple[str, str],
    section: str,
) -> dict[str, Any]:
    parent: dict[str, Any] = {"name": gateway[1]}
    if gateway[0]:
        parent["namespace"] = gateway[0]
    if section:
        parent["sectionName"] = section
    body: dict[str, Any] = {"parentRefs": [parent]}
    if host:
        body["hostnames"] = [host]
    body["rules"] = rules
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": {"name": route_name, "namespace": plan.ref.namespace},
        "spec": body,
    }
