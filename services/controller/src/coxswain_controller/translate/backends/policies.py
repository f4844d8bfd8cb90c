"""BackendTLSPolicy: what one policy asks of the TLS to its backends, and its status.

Where it sits: `resolver.BackendResolver` reads every policy once (`read_policy`) and gives a
backend the TLS of the policy that governs it; `policy_verdicts` runs when a pass's result is
assembled, from the routes the pass serves, so a patched pass answers as a fresh one does.

Spec 003 "BackendTLSPolicy": "validation.hostname is sent as the SNI and is the name the
certificate is verified against ... a bundle from caCertificateRefs is the whole of the trust for
that backend, ... and only a policy selecting System trusts the system roots." The Gateway API
(BackendTLSPolicyValidation): "If SubjectAltNames are specified, Hostname can be used for
certificate selection but MUST NOT be used for authentication"; the certificate "MUST have at
least one Subject Alternate Name matching one of the specified SubjectAltNames".

Status (GEP-713, the BackendTLSPolicy API): one `ancestors` entry per Gateway of ours serving a
route whose backendRef the policy targets, each with Accepted (False: Conflicted when an older
policy holds each of its targets, NoValidCACertificate when no caCertificateRef is usable,
Invalid for a value it cannot honour) and ResolvedRefs (False: InvalidKind for a reference to a
kind other than a core ConfigMap or Secret, InvalidCACertificateRef for one that is missing or
holds no certificate). A policy whose references are only partly usable is served with the
usable ones; a backend whose governing policy cannot be honoured answers 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.certificates import CA_KINDS, load_ca_bundle
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
    RouteVerdict,
)
from coxswain_routing import UpstreamTLS

__all__ = ["PolicyRead", "policy_targets", "policy_verdicts", "read_policy"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
KIND = "BackendTLSPolicy"
_RESOLVED = Condition(
    ConditionType.RESOLVED_REFS, True, Reason.RESOLVED_REFS, "all references resolved"
)
_ACCEPTED = Condition(ConditionType.ACCEPTED, True, Reason.ACCEPTED, "accepted")


@dataclass(frozen=True, slots=True)
class PolicyRead:
    """One policy as read: the TLS it gives its backends, or why it gives none."""

    policy: Obj
    tls: UpstreamTLS | None  # None: it cannot be honoured, and its backends answer 500
    accepted: Condition  # before conflicts with other policies are weighed
    resolved: Condition

    @property
    def where(self) -> str:
        return f"{KIND} {namespace(self.policy)}/{name(self.policy)}"

    @property
    def refusal(self) -> str:
        """Why a backend it governs is not served (the route's ResolvedRefs message)."""
        return f"{self.where} cannot be honored: {self.accepted.message}"


def _invalid(policy: Obj, message: str) -> PolicyRead:
    return PolicyRead(
        policy, None, Condition(ConditionType.ACCEPTED, False, Reason.INVALID, message), _RESOLVED
    )


def read_policy(inputs: Inputs, policy: Obj) -> PolicyRead:
    validation = spec(policy).get("validation") or {}
    hostname = str(validation.get("hostname") or "")
    if not hostname or hostname.startswith("*"):
        return _invalid(policy, "validation.hostname must be a precise name")
    sans = _subject_alt_names(validation.get("subjectAltNames") or [])
    if isinstance(sans, str):
        return _invalid(policy, sans)
    well_known = validation.get("wellKnownCACertificates")
    refs = validation.get("caCertificateRefs") or []
    if well_known and refs:
        return _invalid(policy, "caCertificateRefs and wellKnownCACertificates exclude each other")
    if well_known:
        if well_known != "System":
            return _invalid(policy, f"unknown wellKnownCACertificates {well_known}")
        tls = UpstreamTLS(hostname, system_roots=True, subject_alt_names=sans[0])
        return PolicyRead(policy, _with_uris(tls, sans[1]), _ACCEPTED, _RESOLVED)
    if not refs:
        return _invalid(policy, "no caCertificateRefs and no wellKnownCACertificates")
    return _with_bundle(inputs, policy, hostname, refs, sans)


def _with_uris(tls: UpstreamTLS, uris: tuple[str, ...]) -> UpstreamTLS:
    return UpstreamTLS(tls.sni, tls.ca_bundle_pem, tls.system_roots, tls.subject_alt_names, uris)


def _with_bundle(
    inputs: Inputs,
    policy: Obj,
    hostname: str,
    refs: list[Mapping[str, Any]],
    sans: tuple[tuple[str, ...], tuple[str, ...]],
) -> PolicyRead:
    bundle, problems = b"", []
    for ref in refs:
        loaded = _ca_ref(inputs, policy, ref)
        if isinstance(loaded, bytes):
            bundle += loaded
        else:
            problems.append(loaded)
    resolved = _RESOLVED
    if problems:
        message = "; ".join(m for _, m in problems)
        resolved = Condition(ConditionType.RESOLVED_REFS, False, problems[0][0], message)
    if not bundle:
        accepted = Condition(
            ConditionType.ACCEPTED, False, Reason.NO_VALID_CA_CERTIFICATE, resolved.message
        )
        return PolicyRead(policy, None, accepted, resolved)
    tls = UpstreamTLS(hostname, bundle, False, sans[0], sans[1])
    return PolicyRead(policy, tls, _ACCEPTED, resolved)


def _ca_ref(inputs: Inputs, policy: Obj, ref: Mapping[str, Any]) -> bytes | tuple[Reason, str]:
    group, kind = ref.get("group") or "", str(ref.get("kind") or "")
    ref_name = str(ref.get("name", ""))
    if group or kind not in CA_KINDS:
        return (
            Reason.INVALID_KIND,
            f"caCertificateRef kind {group or 'core'}/{kind} is not supported",
        )
    # LocalObjectReference: always in the policy's own namespace.
    holder = inputs.get(kind, namespace(policy), ref_name)
    if holder is None:
        return Reason.INVALID_CA_CERTIFICATE_REF, f"{kind} {namespace(policy)}/{ref_name} not found"
    loaded = load_ca_bundle(holder, kind)
    return (Reason.INVALID_CA_CERTIFICATE_REF, loaded) if isinstance(loaded, str) else loaded


def _subject_alt_names(
    entries: list[Mapping[str, Any]],
) -> tuple[tuple[str, ...], tuple[str, ...]] | str:
    """(DNS names lower-cased, URIs), or why one entry cannot be honoured."""
    hostnames: list[str] = []
    uris: list[str] = []
    for i, entry in enumerate(entries):
        kind = entry.get("type")
        if kind == "Hostname" and entry.get("hostname"):
            hostnames.append(str(entry["hostname"]).lower())
        elif kind == "URI" and entry.get("uri") and ":" in str(entry["uri"]):
            uris.append(str(entry["uri"]))
        else:
            return f"subjectAltNames[{i}] is neither a Hostname nor an absolute URI"
    return tuple(hostnames), tuple(uris)


# ------------------------------------------------------------------------------- targets


def policy_targets(policy: Obj) -> list[tuple[str, str]]:
    """(Service name, sectionName or "") of each Service the policy targets."""
    return [
        (str(t.get("name", "")), str(t.get("sectionName") or ""))
        for t in spec(policy).get("targetRefs") or []
        if (t.get("kind") or "Service") == "Service" and not t.get("group")
    ]


def _holds(policy: Obj) -> tuple[int, str]:
    """Precedence among policies on one target: "The older policy by creation timestamp takes
    precedence ... The policy appearing first in alphabetical order by {name}"."""
    return (created(policy), name(policy))


def _conflicted(policy: Obj, by_target: Mapping[tuple[str, str, str], list[Obj]]) -> str:
    """The policy holding each of this one's targets when none is its own, else ""."""
    winners = []
    for service, section in policy_targets(policy):
        holder = min(by_target[(namespace(policy), service, section)], key=_holds)
        if holder is policy:
            return ""
        winners.append(f"{KIND} {namespace(holder)}/{name(holder)}")
    return ", ".join(sorted(set(winners)))


# -------------------------------------------------------------------------------- status


class Contribution(Protocol):
    """What the status reads of a served route (`routes.httproutes.RouteContribution`)."""

    @property
    def route(self) -> Obj: ...

    @property
    def verdict(self) -> RouteVerdict | None: ...


def policy_verdicts(
    inputs: Inputs, reads: Mapping[tuple[str, str], PolicyRead], routes: Iterable[Contribution]
) -> list[PolicyVerdict]:
    """A verdict for every policy read (`reads` by namespace and name): those no Gateway of
    ours uses get none of our ancestors, which withdraws entries a former pass wrote."""
    if not reads:
        return []
    by_target: dict[tuple[str, str, str], list[Obj]] = {}
    for read in reads.values():
        for service, section in policy_targets(read.policy):
            by_target.setdefault((namespace(read.policy), service, section), []).append(read.policy)
    ancestors = _ancestors(inputs, by_target, routes)
    verdicts = []
    for key, read in sorted(reads.items()):
        conditions = _conditions(read, _conflicted(read.policy, by_target))
        gateways = sorted(ancestors.get(key, ()))
        verdicts.append(
            PolicyVerdict(
                ObjectRef(KIND, *key),
                generation(read.policy),
                uid(read.policy),
                tuple(AncestorVerdict(_gateway_ref(*g), conditions) for g in gateways),
            )
        )
    return verdicts


def _conditions(read: PolicyRead, holder: str) -> tuple[Condition, ...]:
    accepted = read.accepted
    if accepted.status and holder:
        message = f"{holder} holds each of its targets"
        accepted = Condition(ConditionType.ACCEPTED, False, Reason.CONFLICTED, message)
    return (accepted, read.resolved)


def _gateway_ref(ns: str, gateway: str) -> dict[str, str]:
    return {"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": ns, "name": gateway}


def _ancestors(
    inputs: Inputs,
    by_target: Mapping[tuple[str, str, str], list[Obj]],
    routes: Iterable[Contribution],
) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Policy (namespace, name) -> the Gateways serving a route with a backend it targets."""
    found: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for contribution in routes:
        gateways = _accepting_gateways(contribution)
        if not gateways:
            continue
        route_ns = namespace(contribution.route)
        for ref in _backend_refs(contribution.route):
            service_ns = str(ref.get("namespace") or route_ns)
            service = str(ref.get("name", ""))
            # A policy for the whole Service, and one for the port's section, both target it.
            sections = {"", _port_name(inputs, service_ns, service, ref.get("port"))}
            for section in sections:
                for policy in by_target.get((service_ns, service, section), []):
                    found.setdefault((namespace(policy), name(policy)), set()).update(gateways)
    return found


def _accepting_gateways(contribution: Contribution) -> set[tuple[str, str]]:
    """The Gateways of which a parentRef of the route is Accepted."""
    verdict = contribution.verdict
    if verdict is None:
        return set()
    route_ns = namespace(contribution.route)
    return {
        (str(p.parent_ref.get("namespace") or route_ns), str(p.parent_ref.get("name", "")))
        for p in verdict.parents
        if (p.parent_ref.get("kind") or "Gateway") == "Gateway"
        and any(c.type is ConditionType.ACCEPTED and c.status for c in p.conditions)
    }


def _backend_refs(route: Obj) -> Iterator[Mapping[str, Any]]:
    """Every Service a route's rules send to: backendRefs and mirrors, theirs included."""
    for rule in spec(route).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            if (ref.get("kind") or "Service") == "Service" and not ref.get("group"):
                yield ref
            yield from _mirrors(ref.get("filters") or [])
        yield from _mirrors(rule.get("filters") or [])


def _mirrors(filters: list[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for flt in filters:
        mirror = (flt.get("requestMirror") or {}).get("backendRef")
        if mirror and (mirror.get("kind") or "Service") == "Service" and not mirror.get("group"):
            yield mirror


def _port_name(inputs: Inputs, ns: str, service: str, number: Any) -> str:
    obj = inputs.get("Service", ns, service)
    for port in spec(obj or {}).get("ports") or []:
        if port.get("port") == number and (port.get("protocol") or "TCP") == "TCP":
            return str(port.get("name") or "")
    return ""
