"""Ingress v1: which Ingresses are ours, and their rules on the shared Ingress ports.

Class selection, in the order Kubernetes defines it: `spec.ingressClassName` naming an
IngressClass whose controller is ours; else the legacy `kubernetes.io/ingress.class`
annotation naming one; else, with neither, the IngressClass marked default, if it is ours.
Ingresses share the Ingress ports and merge by host and path; on an identical host and path
the older Ingress wins and the newer gets a Warning Event. An Ingress wildcard host covers
exactly one label. `defaultBackend` answers what no rule claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.gateways.certificates import load_tls_secret
from coxswain_controller.translate.guard import MALFORMED, guarded, malformed_event
from coxswain_controller.translate.ingress.ingress_params import ClassParameters, class_parameters
from coxswain_controller.translate.inputs import (
    Inputs,
    Obj,
    Options,
    created,
    generation,
    meta,
    name,
    namespace,
    spec,
    uid,
)
from coxswain_controller.translate.result import Event, IngressVerdict, ObjectRef
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_controller.translate.tables import ScopeTables
from coxswain_routing import (
    Match,
    PathMatch,
    PathType,
    RouteId,
    Rule,
    TlsCertificate,
    WildcardScope,
)

__all__ = ["ingress_verdicts", "ingresses"]

LEGACY_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
# Rule index of a defaultBackend: after every rule of its Ingress.
DEFAULT_BACKEND_INDEX = 1_000_000
_PATH_TYPES = {
    "Prefix": PathType.PATH_PREFIX,
    "Exact": PathType.EXACT,
    "ImplementationSpecific": PathType.IMPLEMENTATION_SPECIFIC,
}


def _classes(inputs: Inputs, options: Options) -> tuple[dict[str, Obj], str | None]:
    read = guarded("IngressClass", inputs.all("IngressClass"), _class_facts, [])
    ours = {name(c): c for c, (controller, _) in read if controller == options.ingress_controller}
    defaults = [name(c) for c, (_, default) in read if default]
    return ours, defaults[0] if len(defaults) == 1 else None


def _parameters(inputs: Inputs, ours: Mapping[str, Obj]) -> dict[str, ClassParameters | str]:
    """Each of our classes' parameters, or why they cannot be honored (ingress_params)."""
    found: dict[str, ClassParameters | str] = {}
    for class_name, obj in ours.items():
        try:
            found[class_name] = class_parameters(inputs, obj)
        except MALFORMED as exc:
            found[class_name] = f"parameters cannot be read: {exc}"
    return found


def _class_facts(ingress_class: Obj) -> tuple[object, bool]:
    """(spec.controller, marked default): an IngressClass that cannot be read claims nothing."""
    annotations = meta(ingress_class).get("annotations") or {}
    return spec(ingress_class).get("controller"), annotations.get(
        DEFAULT_CLASS_ANNOTATION
    ) == "true"


def _class_of(ingress: Obj, ours: Mapping[str, Obj], default: str | None) -> str | None:
    """The class of ours the Ingress belongs to, or None when it is not ours."""
    class_name = spec(ingress).get("ingressClassName")
    if not class_name:
        class_name = (meta(ingress).get("annotations") or {}).get(LEGACY_ANNOTATION) or default
    return str(class_name) if class_name is not None and class_name in ours else None


def claimed_ingresses(
    inputs: Inputs, options: Options, malformed: list[Event] | None = None
) -> list[Obj]:
    """The Ingresses of our classes whose parameters can be honored, oldest first (the order
    conflicts are settled in). `malformed` also receives each refused class's Events."""
    events: list[Event] = [] if malformed is None else malformed
    ours, default = _classes(inputs, options)
    parameters = _parameters(inputs, ours)
    for named, read_parameters in sorted(parameters.items()):
        if isinstance(read_parameters, ClassParameters) and read_parameters.unused:
            ref = ObjectRef("IngressClass", "", named)
            message = "has no effect yet: " + "; ".join(read_parameters.unused)
            events.append(Event(ref, uid(ours[named]), "Warning", "Rejected", message))
    read = guarded("Ingress", inputs.all("Ingress"), lambda i: _class_of(i, ours, default), events)
    claimed = []
    for ingress, class_name in read:
        if class_name is None:
            continue
        verdict = parameters[class_name]
        if isinstance(verdict, str):
            # As a GatewayClass whose parameters cannot be honored serves no Gateway.
            ref = ObjectRef("Ingress", namespace(ingress), name(ingress))
            message = f"IngressClass {class_name}: {verdict}; the Ingress is not served"
            events.append(Event(ref, uid(ingress), "Warning", "InvalidParameters", message))
            continue
        claimed.append(ingress)
    claimed.sort(key=lambda i: (created(i), namespace(i), name(i)))
    return claimed


def ingress_verdicts(
    inputs: Inputs, options: Options, addresses: tuple[tuple[str, str], ...] | None
) -> list[IngressVerdict]:
    """Each claimed Ingress's status.loadBalancer, when a Service is published (None: no
    Service is, and Ingress status is left alone)."""
    if addresses is None:
        return []
    return [
        IngressVerdict(
            ObjectRef("Ingress", namespace(i), name(i)), generation(i), uid(i), addresses
        )
        for i in sorted(claimed_ingresses(inputs, options), key=lambda i: (namespace(i), name(i)))
    ]


def ingresses(
    inputs: Inputs, options: Options, resolver: BackendResolver, tables: ScopeTables
) -> tuple[list[Event], frozenset[tuple[str, str]]]:
    """Every claimed Ingress's rules and certificates into `tables`: the Events, and the
    (namespace, name) of every Service they name (a change to one cannot be patched)."""
    with resolver.recording() as services:
        events = _ingresses(inputs, options, resolver, tables)
    return events, frozenset(services)


def _ingresses(
    inputs: Inputs, options: Options, resolver: BackendResolver, tables: ScopeTables
) -> list[Event]:
    events: list[Event] = []
    claimed = claimed_ingresses(inputs, options, events)
    owners: dict[tuple[str, str, str], Obj] = {}
    for ingress in claimed:
        try:
            # A dry run into throwaway tables reads everything the real one will, so a
            # malformed Ingress is caught before it has added half its rules.
            _ingress(ingress, options, resolver, ScopeTables(), dict(owners), inputs)
        except MALFORMED as exc:
            events.append(malformed_event("Ingress", ingress, exc))
            continue
        events += _ingress(ingress, options, resolver, tables, owners, inputs)
    return events


def _ingress(
    ingress: Obj,
    options: Options,
    resolver: BackendResolver,
    tables: ScopeTables,
    owners: dict[tuple[str, str, str], Obj],
    inputs: Inputs,
) -> list[Event]:
    ref = ObjectRef("Ingress", namespace(ingress), name(ingress))
    problems: list[str] = []
    conflicts: list[str] = []
    index = 0
    for rule in spec(ingress).get("rules") or []:
        host = str(rule.get("host") or "").lower()
        for path in (rule.get("http") or {}).get("paths") or []:
            kind = _PATH_TYPES.get(
                str(path.get("pathType", "ImplementationSpecific")),
                PathType.IMPLEMENTATION_SPECIFIC,
            )
            value = str(path.get("path") or "/")
            owner = owners.setdefault((host, kind.value, value), ingress)
            if owner is not ingress:
                conflicts.append(
                    f"{host or '*'}{value} is served by the older Ingress "
                    f"{namespace(owner)}/{name(owner)}"
                )
            compiled = _rule(
                ingress,
                index,
                Match(PathMatch(kind, value)),
                path.get("backend") or {},
                resolver,
                problems,
            )
            _add(tables, options, host, compiled)
            index += 1
    backend = spec(ingress).get("defaultBackend")
    if backend:
        _add(
            tables,
            options,
            "",
            _rule(ingress, DEFAULT_BACKEND_INDEX, Match(), backend, resolver, problems),
        )
    problems += _tls(ingress, inputs, options, tables)
    events = [Event(ref, uid(ingress), "Warning", "Conflicted", c) for c in conflicts]
    if problems:
        events.append(Event(ref, uid(ingress), "Warning", "Rejected", "; ".join(problems)))
    return events


def _rule(
    ingress: Obj,
    index: int,
    match: Match,
    backend: Mapping[str, Any],
    resolver: BackendResolver,
    problems: list[str],
) -> Rule:
    rid = RouteId(created(ingress), namespace(ingress), name(ingress), "Ingress", index)
    service = backend.get("service")
    if not service:
        problems.append(f"rule {index}: only Service backends are supported")
        ref: dict[str, Any] = {"kind": "Resource", "group": "unsupported", "name": "", "port": 0}
    else:
        ref = {"name": service.get("name", ""), "port": _port(ingress, service, resolver)}
    resolved = resolver.resolve(ref, route_kind="Ingress", route_namespace=namespace(ingress))
    if resolved.problem is not None and service:
        problems.append(resolved.problem[1])
    return Rule(rid, (match,), backends=(resolved.backend,))


def _port(ingress: Obj, service: Mapping[str, Any], resolver: BackendResolver) -> Any:
    port = service.get("port") or {}
    if port.get("number") is not None:
        return port["number"]
    return resolver.port_number(
        namespace(ingress), str(service.get("name", "")), str(port.get("name", ""))
    )


def _add(tables: ScopeTables, options: Options, host: str, rule: Rule) -> None:
    scope = WildcardScope.ONE_LABEL
    for port in (options.ingress_http_port, options.ingress_https_port):
        tables.add_rules(
            SHARED_POOL,
            table="ingress",
            bind_port=port,
            host=host,
            rules=(rule,),
            listener_port=port,
            wildcard_scope=scope,
        )


def _tls(ingress: Obj, inputs: Inputs, options: Options, tables: ScopeTables) -> list[str]:
    problems = []
    for entry in spec(ingress).get("tls") or []:
        secret = inputs.get("Secret", namespace(ingress), str(entry.get("secretName", "")))
        if secret is None:
            problems.append(f"TLS Secret {namespace(ingress)}/{entry.get('secretName')} not found")
            continue
        loaded = load_tls_secret(secret)
        if isinstance(loaded, str):
            problems.append(loaded)
            continue
        hosts = (
            tuple(sorted({str(h).lower() for h in entry.get("hosts") or []})) or loaded.dns_names
        )
        certificate = TlsCertificate(hosts, loaded.chain_pem, loaded.key_pem, loaded.source)
        tables.add_certificate(SHARED_POOL, options.ingress_https_port, certificate)
    return problems
