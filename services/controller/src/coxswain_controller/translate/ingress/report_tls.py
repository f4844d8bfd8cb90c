"""The migration report's TLS part: what an Ingress's proxy-ssl-*, auth-tls-* and
ssl-passthrough become in the Gateway API, as manifests where it has them and notes where not.

Where it sits: `report._entry` asks `tls_part` for each Ingress it reports, beside its
HTTPRoutes and CoxswainPolicy. proxy-ssl-* is a BackendTLSPolicy per backend Service (its
`caCertificateRefs` the Secret, whose ca.crt Coxswain reads; its `hostname` proxy-ssl-name); the
client certificate is a Gateway's `spec.tls.backend.clientCertificateRef`, one per Gateway
rather than per backend, which the notes say. ssl-passthrough is a TLSRoute per host passed
through, attached to a TLS listener in Passthrough mode.

auth-tls-* have no per-host form in the Gateway API: client certificates are validated per
Gateway port (`spec.tls.frontend`, GEP-91), for every host its HTTPS listeners serve, and no
CoxswainPolicy field asks for them. verify-client "on" becomes a merge patch of the Gateway
(`gatewayPatches`: frontend validation trusting the Secret, mode AllowValidOnly), whose one
difference a client sees is a failed handshake where ingress-nginx answers 400; the notes say
what else has no equivalent (optional, verify-depth, match-cn, the error page, the ssl-client-*
headers), so such an Ingress keeps serving its hosts until its clients need none of it.
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.translate.ingress import lowering
from coxswain_controller.translate.ingress.annotations.model import ClientTlsSpec
from coxswain_controller.translate.ingress.passthrough import ROOT, passable
from coxswain_controller.translate.ingress.plans import IngressPlan

__all__ = ["tls_part"]

GATEWAY_API = "gateway.networking.k8s.io/v1"


def tls_part(
    plan: IngressPlan, ctx: lowering.Context, gateway: tuple[str, str]
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """(manifests by report key, notes) for the Ingress's TLS annotations."""
    manifests: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    if plan.policy.passthrough:
        manifests["tlsRoutes"] = _tls_routes(plan, ctx, gateway)
        notes.append(
            "ssl-passthrough: the TLSRoutes below attach to a Gateway listener of protocol TLS "
            "(tls.mode Passthrough), named tls-passthrough; in the Gateway API a port serves "
            "one protocol, so it cannot be the HTTPS listener's port, as it is for ingress-nginx"
        )
    if plan.policy.backend_tls is not None and plan.backend_tls is not None:
        manifests["backendTLSPolicies"] = _backend_policies(plan)
        if plan.backend_tls.client_certificate is not None:
            notes.append(
                "proxy-ssl-secret's tls.crt and tls.key: the Gateway's "
                "spec.tls.backend.clientCertificateRef presents a client certificate to every "
                "backend of the Gateway's routes, not to this Service's alone"
            )
    if plan.policy.client_tls is not None:
        patches, said = _client_certificates(plan, plan.policy.client_tls, gateway)
        if patches:
            manifests["gatewayPatches"] = patches
        notes += said
    return manifests, notes


def _client_certificates(
    plan: IngressPlan, spec: ClientTlsSpec, gateway: tuple[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The Gateway's frontend validation meaning auth-tls-* (verify "on" alone), and notes."""
    if not spec.asked:
        return [], ['auth-tls-verify-client "off" asks for no certificate: nothing to carry over']
    ns = plan.ref.namespace
    ref = {"group": "", "kind": "Secret", "name": spec.secret, "namespace": ns}
    lacking = [what for what, wanted in (
        ("verify-depth", spec.depth != 1),
        ("match-cn", bool(spec.match_cn)),
        ("error-page", bool(spec.error_page)),
        ("pass-certificate-to-upstream", spec.pass_certificate),
    ) if wanted]  # fmt: skip
    lacking.append("the ssl-client-* request headers")
    notes = [
        "auth-tls-*: the Gateway API validates client certificates per Gateway port "
        "(spec.tls.frontend), for every host of its HTTPS listeners, not per host (a Gateway "
        f"of another namespace needs a ReferenceGrant in {ns} for Secret {spec.secret}). It "
        "has no equivalent, nor has a CoxswainPolicy, of: "
        f"{', '.join(lacking)}; keep this Ingress serving its hosts until its clients and "
        "backends need none of it"
    ]
    if not spec.required:
        notes.append(
            'auth-tls-verify-client "optional" has no Gateway API equivalent: '
            "AllowInsecureFallback admits a certificate that fails verification as well (and "
            "Coxswain then asks for none)"
        )
        return [], notes
    validation = {"caCertificateRefs": [ref], "mode": "AllowValidOnly"}
    patch = {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": {"name": gateway[1], **({"namespace": gateway[0]} if gateway[0] else {})},
        "spec": {"tls": {"frontend": {"default": {"validation": validation}}}},
    }
    notes.append(
        'auth-tls-verify-client "on": the gatewayPatches below (a merge patch of the '
        "Gateway) refuse in the handshake a client without a valid certificate, where "
        "ingress-nginx answers 400"
    )
    return [patch], notes


def _backend_policies(plan: IngressPlan) -> list[dict[str, Any]]:
    spec = plan.policy.backend_tls
    assert spec is not None
    services = sorted({p.backend.name for p in plan.paths if p.backend.name})
    return [
        {
            "apiVersion": GATEWAY_API,
            "kind": "BackendTLSPolicy",
            "metadata": {"name": f"{plan.ref.name}-{service}", "namespace": plan.ref.namespace},
            "spec": {
                "targetRefs": [{"group": "", "kind": "Service", "name": service}],
                "validation": {
                    "caCertificateRefs": [{"group": "", "kind": "Secret", "name": spec.secret}],
                    "hostname": spec.name,
                },
            },
        }
        for service in services
    ]


def _tls_routes(
    plan: IngressPlan, ctx: lowering.Context, gateway: tuple[str, str]
) -> list[dict[str, Any]]:
    roots = [p for p in plan.paths if p.value == ROOT and passable(p.host)]
    parent: dict[str, Any] = {"name": gateway[1], "sectionName": "tls-passthrough"}
    if gateway[0]:
        parent["namespace"] = gateway[0]
    routes = []
    for i, path in enumerate(sorted(roots, key=lambda p: p.host)):
        ref = lowering.backend_ref(plan, path.backend, ctx, 1)
        routes.append(
            {
                "apiVersion": GATEWAY_API,
                "kind": "TLSRoute",
                "metadata": {
                    "name": plan.ref.name if len(roots) == 1 else f"{plan.ref.name}-{i}",
                    "namespace": plan.ref.namespace,
                },
                "spec": {
                    "parentRefs": [parent],
                    "hostnames": [path.host],
                    "rules": [{"backendRefs": [{"name": ref["name"], "port": ref["port"]}]}],
                },
            }
        )
    return routes
