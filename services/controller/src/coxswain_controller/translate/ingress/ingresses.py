"""Ingress v1: which Ingresses are ours, and their rules on the shared Ingress ports.

Class selection, in the order Kubernetes defines it: `spec.ingressClassName` naming an
IngressClass whose controller is ours; else the legacy `kubernetes.io/ingress.class`
annotation naming one; else, with neither, the IngressClass marked default, if it is ours.
Ingresses share the Ingress ports and merge by host and path; on an identical host and path
the older Ingress wins and the newer gets a Warning Event. An Ingress wildcard host covers
exactly one label. `defaultBackend` answers what no rule claims.

ingress-nginx's annotations (over the class's `defaultAnnotations`) are read into a policy
(`annotations`); every one refused, unknown or ignored gets an InvalidAnnotation Warning Event,
and a refused one (a snippet, a value that cannot be honoured, a feature not built yet) leaves
the Ingress's paths unserved rather than served wrong. The stages after reading: hosts whose
paths are regexes (`regex_hosts`), canaries matched to their mains (`canaries`), each served
Ingress lowered into rules (`lowering`; one whose auth-url names $host again, once the others
say which Service serves its auth path: `host_auth`), each host's client certificates settled
from its oldest Ingress asking for them (`client_tls`), and the rules added, oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.gateways.certificates import load_tls_secret
from coxswain_controller.translate.guard import MALFORMED, guarded, malformed_event
from coxswain_controller.translate.ingress import (
    canaries,
    client_tls,
    host_auth,
    lowering,
    passthrough,
    policies,
    regex_hosts,
    tls_secrets,
)
from coxswain_controller.translate.ingress.canaries import INVALID_ANNOTATION
from coxswain_controller.translate.ingress.ingress_params import ClassParameters, class_parameters
from coxswain_controller.translate.ingress.plans import IngressPlan, read_plan
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
from coxswain_routing import Rule, TlsCertificate, WildcardScope

__all__ = [
    "Stages",
    "claimant",
    "claimed_ingresses",
    "ingress_verdicts",
    "ingresses",
    "lower_all",
    "stages",
]

LEGACY_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"


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
    return [ingress for ingress, _, _ in _claimed(inputs, options, malformed)]


def claimant(
    inputs: Inputs, options: Options
) -> Callable[[Obj], tuple[str, ClassParameters] | None]:
    """`claimed_ingresses`' rule for one Ingress at a time: the class of ours that serves it,
    with the class's parameters, or None (another controller's, or parameters that cannot be
    honoured). The sources ask it of each Ingress as it changes (sources/references.py)."""
    ours, default = _classes(inputs, options)
    parameters = _parameters(inputs, ours)

    def claim(ingress: Obj) -> tuple[str, ClassParameters] | None:
        class_name = _class_of(ingress, ours, default)
        if class_name is None:
            return None
        verdict = parameters[class_name]
        return (class_name, verdict) if isinstance(verdict, ClassParameters) else None

    return claim


def _claimed(
    inputs: Inputs, options: Options, malformed: list[Event] | None = None
) -> list[tuple[Obj, str, ClassParameters]]:
    """`claimed_ingresses`, each with its class and the class's parameters."""
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
        claimed.append((ingress, class_name, verdict))
    claimed.sort(key=lambda c: (created(c[0]), namespace(c[0]), name(c[0])))
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


@dataclass
class Stages:
    """What the stages before lowering make of the claimed Ingresses (the migration report
    reads them too)."""

    plans: list[IngressPlan]  # oldest first
    certificates: list[TlsCertificate]
    patterns: dict[tuple[str, str], regex_hosts.Pattern]
    canaries: dict[canaries.MainKey, canaries.CanaryPath]
    canary_events: list[Event]

    @property
    def names(self) -> tuple[str, ...]:
        """Every name an Ingress certificate serves, which ssl-redirect asks about."""
        return tuple(sorted({n for c in self.certificates for n in c.server_names}))

    def context(self, resolver: BackendResolver, options: Options) -> lowering.Context:
        https = options.ingress_https_port
        return lowering.Context(resolver, https, self.patterns, self.names, self.canaries)


def stages(inputs: Inputs, options: Options, events: list[Event]) -> Stages:
    """Read each Ingress (annotations included), load certificates, find the regex hosts and
    their patterns, match canaries to mains."""
    plans = _plans(inputs, options, events)
    certificates = _certificates(plans, inputs)
    patterns = regex_hosts.patterns(plans, regex_hosts.enforced_hosts(plans))
    attached, canary_events = canaries.attach(plans)
    return Stages(plans, certificates, patterns, attached, canary_events)


def _ingresses(
    inputs: Inputs, options: Options, resolver: BackendResolver, tables: ScopeTables
) -> list[Event]:
    """`stages`, then each served Ingress lowered, its hosts' client certificates settled
    (`client_tls`: a host's are its oldest served Ingress's), and each added, oldest first."""
    events: list[Event] = []
    found = stages(inputs, options, events)
    for certificate in found.certificates:
        tables.add_certificate(SHARED_POOL, options.ingress_https_port, certificate)
    ctx = found.context(resolver, options)
    owners: dict[tuple[str, str, str], IngressPlan] = {}
    passed = passthrough.pass_through(found.plans, ctx, resolver)
    passthrough.serve(passed, tables, options.ingress_https_port)
    lowered = lower_all(found, ctx)
    served = [(p, low) for p, low in zip(found.plans, lowered, strict=True)
              if isinstance(low, lowering.Lowered) and not low.refused]  # fmt: skip
    clients = client_tls.claim(served, options.ingress_https_port, passed.owners)
    for store in clients.stores():
        tables.add_client_ca(SHARED_POOL, store)
    for plan, outcome in zip(found.plans, lowered, strict=True):
        events += _annotation_events(plan)
        events += [e for e in passed.events if e.ref == plan.ref]
        if outcome is not None:
            events += _serve(plan, outcome, options, tables, owners, clients)
        elif plan.tls_problems:
            message = "; ".join(plan.tls_problems)
            events.append(Event(plan.ref, plan.uid, "Warning", "Rejected", message))
        events += [e for e in found.canary_events if e.ref == plan.ref]
        events += [e for e in clients.events if e.ref == plan.ref]
    return events


def lower_all(found: Stages, ctx: lowering.Context) -> list[lowering.Lowered | Event | None]:
    """Each plan lowered (`_lowered`); an Ingress whose auth-url names $host is lowered again
    once the rest tell where its auth path is served (`host_auth`), or refused."""
    lowered = [_lowered(plan, ctx) for plan in found.plans]
    if not host_auth.resolve(found.plans, lowered, ctx):
        return lowered
    return [
        _lowered(plan, ctx) if host_auth.asks(plan) else outcome
        for plan, outcome in zip(found.plans, lowered, strict=True)
    ]


def _lowered(plan: IngressPlan, ctx: lowering.Context) -> lowering.Lowered | Event | None:
    """The Ingress's rules (an Event: it cannot be read); None: it is not lowered at all."""
    if not plan.served or plan.canary or plan.policy.passthrough:
        return None
    try:
        return lowering.lower(plan, ctx)
    except MALFORMED as exc:
        return malformed_event("Ingress", plan.obj, exc)


def _plans(inputs: Inputs, options: Options, events: list[Event]) -> list[IngressPlan]:
    """Every claimed Ingress read, oldest first; one that cannot be read is left out."""
    plans = []
    for ingress, class_name, parameters in _claimed(inputs, options, events):
        try:
            plan = read_plan(ingress, class_name, parameters.default_annotations)
            plan.access_log = parameters.access_log
            policies.load_secrets(plan, inputs)
            tls_secrets.load_tls_secrets(plan, inputs)
            for refused in (client_tls.refusal(plan), host_auth.refusal(plan)):
                if refused is not None:
                    plan.refusals.append(refused)
            plans.append(plan)
        except MALFORMED as exc:
            events.append(malformed_event("Ingress", ingress, exc))
    return plans


def _annotation_events(plan: IngressPlan) -> list[Event]:
    """InvalidAnnotation: each annotation refused, unknown or ignored, and each path a regex
    host cannot read."""
    found = [
        Event(plan.ref, plan.uid, "Warning", INVALID_ANNOTATION, v.message)
        for v in plan.policy.events()
    ]
    for refusal in plan.refusals:
        message = f"{refusal}; the Ingress's paths are not served"
        found.append(Event(plan.ref, plan.uid, "Warning", INVALID_ANNOTATION, message))
    return found


def _serve(
    plan: IngressPlan,
    lowered: lowering.Lowered | Event,
    options: Options,
    tables: ScopeTables,
    owners: dict[tuple[str, str, str], IngressPlan],
    clients: client_tls.ClientHosts,
) -> list[Event]:
    if isinstance(lowered, Event):
        return [lowered]
    if lowered.refused:
        message = (
            "cannot be served as its annotations ask: "
            + "; ".join(lowered.refused)
            + "; the Ingress's paths are not served"
        )
        return [Event(plan.ref, plan.uid, "Warning", INVALID_ANNOTATION, message)]
    conflicts = _conflicts(plan, lowered, owners)
    for host, rules in lowered.https.items():
        _add(tables, options.ingress_https_port, host, clients.https(host, rules))
    for host, rules in lowered.http.items():
        _add(tables, options.ingress_http_port, host, clients.http(host, rules))
    events = [Event(plan.ref, plan.uid, "Warning", "Conflicted", c) for c in conflicts]
    problems = list(dict.fromkeys(lowered.unresolved))
    problems += [f"rule {p.index}: only Service backends are supported"
                 for p in plan.paths if not p.backend.name]  # fmt: skip
    problems += plan.tls_problems
    if problems:
        events.append(Event(plan.ref, plan.uid, "Warning", "Rejected", "; ".join(problems)))
    return events


def _conflicts(
    plan: IngressPlan, lowered: lowering.Lowered, owners: dict[tuple[str, str, str], IngressPlan]
) -> list[str]:
    """On an identical host and path the older Ingress wins; the newer is told."""
    found = []
    for path in plan.paths:
        if path.default:
            continue
        rules = lowered.https.get(path.host) or []
        own = (r for r in rules if r.id.name == plan.ref.name and r.id.rule_index == path.index)
        matched = next((r.matches[0].path for r in own), None)
        if matched is None:
            continue
        owner = owners.setdefault((path.host, matched.type.value, matched.value), plan)
        if owner is not plan:
            found.append(
                f"{path.host or '*'}{path.value} is served by the older Ingress "
                f"{owner.ref.namespace}/{owner.ref.name}"
            )
    return found


def _add(tables: ScopeTables, port: int, host: str, rules: list[Rule]) -> None:
    tables.add_rules(
        SHARED_POOL,
        table="ingress",
        bind_port=port,
        host=host,
        rules=tuple(rules),
        listener_port=port,
        wildcard_scope=WildcardScope.ONE_LABEL,
    )


def _certificates(plans: list[IngressPlan], inputs: Inputs) -> list[TlsCertificate]:
    """Every readable Ingress's certificates for the HTTPS port: a certificate serves its hosts
    whichever Ingress brings it. A Secret that serves nothing is its Ingress's problem."""
    found = []
    for plan in plans:
        for secret_name, hosts in plan.tls:
            try:
                loaded = _certificate(plan, secret_name, hosts, inputs)
            except MALFORMED as exc:
                loaded = f"TLS Secret {namespace(plan.obj)}/{secret_name} cannot be read: {exc}"
            if isinstance(loaded, str):
                plan.tls_problems.append(loaded)
            else:
                found.append(loaded)
    return found


def _certificate(
    plan: IngressPlan, secret_name: str, hosts: tuple[str, ...], inputs: Inputs
) -> TlsCertificate | str:
    ns = namespace(plan.obj)
    secret = inputs.get("Secret", ns, secret_name)
    if secret is None:
        return f"TLS Secret {ns}/{secret_name} not found"
    loaded = load_tls_secret(secret)
    if isinstance(loaded, str):
        return loaded
    return TlsCertificate(
        hosts or loaded.dns_names, loaded.chain_pem, loaded.key_pem, loaded.source
    )
