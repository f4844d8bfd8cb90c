"""GatewayClasses: which are ours, and whether each can be served.

Spec 003 "What is claimed": "A GatewayClass belongs to this controller when its
spec.controllerName equals" our controller name; anything else "is ignored entirely".
A class's parametersRef may name a CoxswainGatewayParameters object, which opts its Gateways
into dedicated proxies (spec 002) and is their parameters' lower layer; any other target, or
parameters that cannot be found or read, cannot be honoured, and then (spec 003) "none of its
Gateways open a port".

Every claimed class reports `status.supportedFeatures` (GEP-2162): the Gateway API features
(their names as the conformance suite's pkg/features spells them) that Coxswain implements and
that a test of this repository shows, each named with its test in docs/conformance.md. A feature
with no such test is left out, however much of it is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.guard import guarded, malformed_event
from coxswain_controller.translate.inputs import Inputs, Options, generation, name, spec, uid
from coxswain_controller.translate.provision import parameters
from coxswain_controller.translate.provision.parameters import GatewayParameters
from coxswain_controller.translate.result import ClassVerdict, Condition, Event, ObjectRef

__all__ = [
    "SUPPORTED_FEATURES",
    "ClassState",
    "class_events",
    "PARAMETERS_GROUP",
    "PARAMETERS_KIND",
    "claimed_classes",
    "is_dedicated_ref",
]

PARAMETERS_GROUP = parameters.PARAMETERS_GROUP
PARAMETERS_KIND = parameters.PARAMETERS_KIND

# GatewayClassStatus.supportedFeatures: "MUST be sorted in ascending alphabetical order by the
# Name key". docs/conformance.md names the test that shows each; keep the two lists alike.
SUPPORTED_FEATURES: tuple[str, ...] = tuple(
    sorted(
        {
            # Core
            "Gateway",
            "GRPCRoute",
            "HTTPRoute",
            "ReferenceGrant",
            "TLSRoute",
            # Gateway (extended)
            "GatewayAddressEmpty",
            "GatewayBackendClientCertificate",
            "GatewayFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            "GatewayHTTPListenerIsolation",
            "GatewayInfrastructurePropagation",
            "GatewayPort8080",
            "GatewayStaticAddresses",
            "ListenerSet",
            # HTTPRoute (extended)
            "HTTPRoute308RedirectStatusCode",
            "HTTPRouteBackendProtocolH2C",
            "HTTPRouteBackendProtocolWebSocket",
            "HTTPRouteBackendRequestHeaderModification",
            "HTTPRouteBackendTimeout",
            "HTTPRouteCORS",
            "HTTPRouteExternalAuth",
            "HTTPRouteExternalAuthHTTP",
            "HTTPRouteHostRewrite",
            "HTTPRouteMethodMatching",
            "HTTPRouteNamedRouteRule",
            "HTTPRouteParentRefPort",
            "HTTPRoutePathRedirect",
            "HTTPRoutePathRewrite",
            "HTTPRoutePortRedirect",
            "HTTPRouteQueryParamMatching",
            "HTTPRouteRequestMirror",
            "HTTPRouteRequestPercentageMirror",
            "HTTPRouteRequestTimeout",
            "HTTPRouteResponseHeaderModification",
            "HTTPRouteRetry",
            "HTTPRouteRetryBackendTimeout",
            "HTTPRouteRetryConnectionError",
            "HTTPRouteSchemeRedirect",
            # Stream routes and TLS
            "BackendTLSPolicy",
            "BackendTLSPolicySANValidation",
            "TCPRoute",
            "TLSRouteModeMixed",
            "TLSRouteModeTerminate",
            "UDPRoute",
        }
    )
)


@dataclass(frozen=True, slots=True)
class ClassState:
    name: str
    accepted: bool
    message: str
    dedicated: bool  # its parametersRef opts every Gateway into a dedicated proxy
    parameters: GatewayParameters | None = None  # its Gateways' lower layer of parameters


def is_dedicated_ref(ref: Mapping[str, Any] | None) -> bool:
    if not ref:
        return False
    return ref.get("group") == PARAMETERS_GROUP and ref.get("kind") == PARAMETERS_KIND


def claimed_classes(
    inputs: Inputs, options: Options, malformed: list[Event]
) -> tuple[dict[str, ClassState], list[ClassVerdict]]:
    states: dict[str, ClassState] = {}
    verdicts = []
    ours = guarded(
        "GatewayClass",
        inputs.all("GatewayClass"),
        lambda c: spec(c).get("controllerName") == options.gateway_controller,
        malformed,
    )
    for obj, claimed in ours:
        if not claimed:
            continue
        ref = spec(obj).get("parametersRef")
        if ref is not None and not isinstance(ref, Mapping):
            malformed.append(malformed_event("GatewayClass", obj, TypeError("parametersRef")))
            continue
        found = _parameters(inputs, ref)
        if isinstance(found, str):
            state = ClassState(name(obj), False, found, False)
            cond = Condition(ConditionType.ACCEPTED, False, Reason.INVALID_PARAMETERS, found)
        else:
            state = ClassState(name(obj), True, "", is_dedicated_ref(ref), found)
            cond = Condition(
                ConditionType.ACCEPTED, True, Reason.ACCEPTED, "claimed by this controller"
            )
        states[state.name] = state
        ref = ObjectRef("GatewayClass", "", name(obj))
        verdicts.append(ClassVerdict(ref, generation(obj), uid(obj), (cond,), SUPPORTED_FEATURES))
    return states, verdicts


def _parameters(inputs: Inputs, ref: Mapping[str, Any] | None) -> GatewayParameters | str | None:
    """The class's parameters (None when it names none), or why they cannot be honoured."""
    if not ref:
        return None
    if not is_dedicated_ref(ref):
        return (
            f"parametersRef {ref.get('group', '')}/{ref.get('kind', '')} {ref.get('name', '')} "
            f"cannot be honored: only {PARAMETERS_GROUP}/{PARAMETERS_KIND} is supported"
        )
    # ParametersReference: "Namespace is the namespace of the referent. This field is required
    # when referring to a Namespace-scoped resource"; CoxswainGatewayParameters is one.
    namespace = ref.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return f"parametersRef to {PARAMETERS_KIND} {ref.get('name', '')} needs a namespace"
    return parameters.resolve(inputs, ref, namespace)


def class_events(verdicts: list[ClassVerdict]) -> list[Event]:
    """Spec 003 "Events": "A claimed GatewayClass gets a Normal Accepted Event", and a Warning
    InvalidParameters one when its parameters cannot be honored."""
    events = []
    for verdict in verdicts:
        accepted = verdict.conditions[0]
        if accepted.status:
            events.append(Event(verdict.ref, verdict.uid, "Normal", "Accepted", accepted.message))
        else:
            events.append(
                Event(verdict.ref, verdict.uid, "Warning", "InvalidParameters", accepted.message)
            )
    return events
