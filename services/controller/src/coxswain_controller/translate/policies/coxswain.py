"""CoxswainPolicies read into `coxswain_routing.Policy`, attached to the rules they target.

Where it sits: `pipeline.build` reads every CoxswainPolicy here (`read_policies`) before the
routes, and hands `Policies.attach` to the tables (`ScopeTables.transform`), so every HTTPRoute
rule placed on a Gateway's table gets the policy its targets give it, in a full pass and in a
patched one alike. The status is read from the snapshots: the Gateways whose tables hold a
rule a policy targets are its GEP-713 ancestors (`Policies.verdicts`).

Direct policy attachment (GEP-713): `targetRefs` name a Gateway, an HTTPRoute, or one rule of an
HTTPRoute by `sectionName` (the rule's name), each in the policy's namespace. A rule's policy is
its Gateway's, with its route's over it, with its own over that, part by part
(`Policy.over`: "the most specific target wins"); policies on the very same target merge the
same way, the older one (then the one first by name) winning a part both set. A policy that
cannot be honoured (a bad CIDR, a Secret that is missing, an auth Service in another namespace)
attaches nothing and says why in each ancestor's Accepted condition.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.guard import MALFORMED
from coxswain_controller.translate.ingress import policies as ingress_policies
from coxswain_controller.translate.inputs import (
    Inputs,
    Obj,
    created,
    generation,
    name,
    namespace,
    spec,
    uid,
)
from coxswain_controller.translate.result import (
    AncestorVerdict,
    Condition,
    ObjectRef,
    PolicyVerdict,
)
from coxswain_routing import (
    BasicAuth,
    ExternalAuth,
    HostRoutes,
    Policy,
    RateKey,
    RateLimit,
    Resource,
    Rule,
    SameSite,
    SessionAffinity,
    SourceRanges,
)

__all__ = ["KIND", "Policies", "basic_auth_secret", "read_policies"]

KIND = "CoxswainPolicy"
GATEWAY_GROUP = "gateway.networking.k8s.io"
_PERIODS = {"Second": 1, "Minute": 60}
_KEYS = {"ClientAddress": RateKey.CLIENT_ADDRESS, "Route": RateKey.ROUTE}
_SAME_SITE = {s.value: s for s in SameSite}
_DURATION = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m(?!s))?(?:([0-9]+)s)?(?:([0-9]+)ms)?")
# A target: (kind, namespace, name, sectionName); "" section for the whole object.
Target = tuple[str, str, str, str]
Key = tuple[str, str]  # (namespace, name)


class _Bad(ValueError):
    """A CoxswainPolicy field that cannot be honoured."""


def _required(raw: Mapping[str, Any], key: str, at: str) -> Any:
    if not isinstance(raw, Mapping):
        raise _Bad(f"{at} must be an object")
    if raw.get(key) is None:
        raise _Bad(f"{at}.{key} is required")
    return raw[key]


def _choice(value: Any, choices: Mapping[str, Any], at: str) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise _Bad(f"{at} {value!r} is not one of {', '.join(c for c in choices if c)}")
    return choices[value]


def _strings(value: Any, at: str) -> tuple[str, ...]:
    """A list of strings, as the CRD declares; anything else is named, not coerced."""
    items = () if value is None else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise _Bad(f"{at} must be a list of strings")
    return tuple(items)


@dataclass
class _Read:
    obj: Obj
    policy: Policy | None  # None: it cannot be honoured (`problem` says why)
    problem: str
    targets: list[Target]


@dataclass
class Policies:
    """Every CoxswainPolicy read, by target; and the Gateways each one reached."""

    reads: list[_Read] = field(default_factory=list)  # by precedence: oldest, then by name
    by_target: dict[Target, list[_Read]] = field(default_factory=dict)

    def attach(self, table: str, rule: Rule) -> Rule:
        """`rule` as it goes into `table`, with the policy its targets give it."""
        if not self.by_target or rule.id.kind != "HTTPRoute" or not table.startswith("gateway/"):
            return rule
        _, gw_ns, gw_name = table.split("/", 2)
        merged = rule.policy
        for level in _levels(gw_ns, gw_name, rule):
            merged = _merged(merged, self.by_target.get(level, []))
        if merged is None or merged.empty or merged == rule.policy:
            return rule
        from dataclasses import replace

        return replace(rule, policy=merged)

    def _reached(self, snapshots: Mapping[Any, Iterable[Resource]]) -> dict[Key, set[Key]]:
        """The Gateways each policy reached: those whose tables hold a rule it targets, read
        from the snapshots themselves, so a patched pass answers as a fresh one does."""
        reached: dict[Key, set[Key]] = {}
        for gateway, rule in _gateway_rules(snapshots):
            for level in _levels(*gateway, rule):
                for read in self.by_target.get(level, ()):
                    reached.setdefault((namespace(read.obj), name(read.obj)), set()).add(gateway)
        return reached

    def verdicts(self, snapshots: Mapping[Any, Iterable[Resource]]) -> list[PolicyVerdict]:
        """Each policy's status.ancestors: the Gateways it reached in `snapshots`."""
        reached = self._reached(snapshots) if self.by_target else {}
        found = []
        for read in sorted(self.reads, key=lambda r: (namespace(r.obj), name(r.obj))):
            key = (namespace(read.obj), name(read.obj))
            condition = _accepted(read)
            ancestors = tuple(
                AncestorVerdict(_gateway_ref(ns, gw), (condition,))
                for ns, gw in sorted(reached.get(key, ()))
            )
            found.append(
                PolicyVerdict(ObjectRef(KIND, *key), generation(read.obj), uid(read.obj), ancestors)
            )
        return found


def _gateway_rules(snapshots: Mapping[Any, Iterable[Resource]]) -> Iterator[tuple[Key, Rule]]:
    """Every HTTPRoute rule on a Gateway's table, with that Gateway."""
    for resources in snapshots.values():
        for resource in resources:
            if isinstance(resource, HostRoutes) and resource.table.startswith("gateway/"):
                _, gw_ns, gw_name = resource.table.split("/", 2)
                for rule in resource.rules:
                    if rule.id.kind == "HTTPRoute":
                        yield (gw_ns, gw_name), rule


def _levels(gw_ns: str, gw_name: str, rule: Rule) -> list[Target]:
    """The targets that give `rule` on Gateway gw_ns/gw_name a policy, least specific first."""
    rid = rule.id
    levels = [("Gateway", gw_ns, gw_name, ""), ("HTTPRoute", rid.namespace, rid.name, "")]
    if rid.rule_name:
        levels.append(("HTTPRoute", rid.namespace, rid.name, rid.rule_name))
    return levels


def _merged(base: Policy | None, reads: list[_Read]) -> Policy | None:
    """`base` with the policies of one target over it, the older winning a part both set."""
    merged = base
    for read in reversed(reads):  # the newest first, so each older one goes over it
        if read.policy is not None:
            merged = read.policy if merged is None else read.policy.over(merged)
    return merged


def _accepted(read: _Read) -> Condition:
    if read.policy is None:
        return Condition(ConditionType.ACCEPTED, False, Reason.INVALID, read.problem)
    return Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "the policy is attached")


def _gateway_ref(ns: str, gateway: str) -> dict[str, str]:
    return {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": ns, "name": gateway}


def read_policies(inputs: Inputs, resolver: BackendResolver) -> Policies:
    """Every CoxswainPolicy, read in precedence order (the older first, then by name)."""
    found = Policies()
    objects = sorted(inputs.all(KIND), key=lambda p: (created(p), namespace(p), name(p)))
    for obj in objects:
        read = _read(obj, inputs, resolver)
        found.reads.append(read)
        for target in read.targets:
            found.by_target.setdefault(target, []).append(read)
    return found


def _read(obj: Obj, inputs: Inputs, resolver: BackendResolver) -> _Read:
    body = spec(obj)
    try:
        targets = _targets(obj, body.get("targetRefs") or [])
        policy = _policy(obj, body, inputs, resolver)
        problems = policy.validate("spec")
    except MALFORMED as exc:
        said = str(exc) if isinstance(exc, _Bad) else f"{type(exc).__name__}: {exc}"
        return _Read(obj, None, f"cannot be honoured: {said}", _safe_targets(obj, body))
    if problems:
        said = "; ".join(f"{p.field}: {p.message}" for p in problems)
        return _Read(obj, None, f"cannot be honoured: {said}", targets)
    return _Read(obj, policy, "", targets)


def _safe_targets(obj: Obj, body: Mapping[str, Any]) -> list[Target]:
    try:
        return _targets(obj, body.get("targetRefs") or [])
    except MALFORMED:
        return []


def _targets(obj: Obj, refs: list[Mapping[str, Any]]) -> list[Target]:
    found = []
    for ref in refs:
        kind, section = str(ref.get("kind", "")), str(ref.get("sectionName") or "")
        if ref.get("group") != GATEWAY_GROUP or kind not in ("Gateway", "HTTPRoute"):
            raise _Bad(f"targetRef {kind} is not a Gateway or an HTTPRoute")
        if kind == "Gateway" and section:
            raise _Bad("a sectionName on a Gateway (a listener) is not supported yet")
        found.append((kind, namespace(obj), str(_required(ref, "name", "targetRef")), section))
    if not found:
        raise _Bad("targetRefs names nothing")
    return found


def _policy(obj: Obj, body: Mapping[str, Any], inputs: Inputs, resolver: BackendResolver) -> Policy:
    ranges = body.get("sourceRanges")
    return Policy(
        source_ranges=None if ranges is None else _ranges(ranges),
        max_body_bytes=int(body.get("maxBodyBytes") or 0),
        rate_limits=tuple(
            _rate(r, f"rateLimits[{i}]") for i, r in enumerate(body.get("rateLimits") or ())
        ),
        connections_per_client=int(body.get("connectionsPerClient") or 0),
        basic_auth=_basic(obj, body.get("basicAuth"), inputs),
        external_auth=_external(obj, body.get("externalAuth"), resolver),
        affinity=_affinity(body.get("sessionAffinity")),
        access_log=bool(body.get("accessLog")),
    )


def _ranges(raw: Mapping[str, Any]) -> SourceRanges:
    if not isinstance(raw, Mapping):
        raise _Bad("sourceRanges must be an object")
    allow = _strings(raw.get("allow"), "sourceRanges.allow")
    return SourceRanges(allow, _strings(raw.get("deny"), "sourceRanges.deny"))


def _rate(raw: Mapping[str, Any], at: str) -> RateLimit:
    return RateLimit(
        requests=int(_required(raw, "requests", at)),
        period_seconds=_choice(raw.get("per") or "Second", _PERIODS, f"{at}.per"),
        burst=int(raw.get("burst") or 0),
        key=_choice(raw.get("key") or "ClientAddress", _KEYS, f"{at}.key"),
        exempt=_strings(raw.get("exempt"), f"{at}.exempt"),
    )


def basic_auth_secret(obj: Obj) -> Key | None:
    """The Secret a CoxswainPolicy's basicAuth reads, in its own namespace: the controller
    watches it by name (sources/references.py). None without basicAuth, or unreadable."""
    try:
        raw = spec(obj).get("basicAuth")
        return None if raw is None else (namespace(obj), str(raw["secretRef"]["name"]))
    except (TypeError, KeyError, AttributeError):
        return None  # read_policies says why the policy cannot be honoured


def _basic(obj: Obj, raw: Mapping[str, Any] | None, inputs: Inputs) -> BasicAuth | None:
    if raw is None:
        return None
    ref = _required(raw, "secretRef", "basicAuth")
    ns, secret_name = namespace(obj), str(_required(ref, "name", "basicAuth.secretRef"))
    secret = inputs.get("Secret", ns, secret_name)
    if secret is None:
        raise _Bad(f"basicAuth: Secret {ns}/{secret_name} not found")
    users = ingress_policies.entries(secret.get("data") or {}, raw.get("secretType", "auth-file"))
    if isinstance(users, str):
        raise _Bad(f"basicAuth: Secret {ns}/{secret_name} {users}")
    realm = str(raw.get("realm") or "Authentication Required")
    return BasicAuth(realm, users, f"{ns}/{secret_name}")


def _external(
    obj: Obj, raw: Mapping[str, Any] | None, resolver: BackendResolver
) -> ExternalAuth | None:
    if raw is None:
        return None
    ref, at = _required(raw, "backendRef", "externalAuth"), "externalAuth.backendRef"
    service, port = str(_required(ref, "name", at)), int(_required(ref, "port", at))
    ns = namespace(obj)
    if (ref.get("namespace") or ns) != ns:
        raise _Bad("externalAuth: a backendRef in another namespace is not supported yet")
    resolved = resolver.resolve({"name": service, "port": port}, route_kind="HTTPRoute",
                                route_namespace=ns)  # fmt: skip
    if not resolved.backend.resolved:
        raise _Bad(f"externalAuth: {resolved.backend.unresolved_reason}")
    return ExternalAuth(
        endpoints=resolved.backend.endpoints,
        host=f"{service}.{ns}.svc.cluster.local:{port}",
        path=str(raw.get("path") or "/"),
        method=str(raw.get("method") or "GET").upper(),
        response_headers=tuple(
            h.lower() for h in _strings(raw.get("responseHeaders"), "externalAuth.responseHeaders")
        ),
        signin=str(raw.get("signinURL") or ""),
        signin_redirect_param=str(raw.get("signinRedirectParam") or "rd"),
        timeout_ms=_duration_ms(str(raw.get("timeout") or "5s")),
    )


def _duration_ms(text: str) -> int:
    """A Gateway API Duration ("1h2m3s", "500ms") in milliseconds."""
    found = _DURATION.fullmatch(text)
    if not text or found is None:
        raise _Bad(f"externalAuth.timeout {text!r} is not a duration")
    h, m, s, ms = (int(g) if g else 0 for g in found.groups())
    return ((h * 60 + m) * 60 + s) * 1000 + ms


def _affinity(raw: Mapping[str, Any] | None) -> SessionAffinity | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _Bad("sessionAffinity must be an object")
    same_site = _choice(raw.get("sameSite") or "", _SAME_SITE, "sessionAffinity.sameSite")
    return SessionAffinity(
        cookie=str(raw.get("cookieName") or "COXSWAIN_AFFINITY"),
        path=str(raw.get("path") or "/"),
        max_age_seconds=int(raw.get("maxAgeSeconds") or 0),
        expires_seconds=int(raw.get("expiresSeconds") or 0),
        same_site=same_site,
        secure=bool(raw.get("secure")),
    )
