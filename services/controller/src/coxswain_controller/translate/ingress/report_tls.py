"""The migration report's TLS part: what an Ingress's proxy-ssl-*, auth-tls-* and
ssl-passthrough become in the Gateway API, as manifests where it has them and notes where not.

Where it sits: `report._entry` asks `tls_part` for each Ingress it reports, beside its
HTTPRoutes and CoxswainPolicy. proxy-ssl-* is a BackendTLSPolicy per backend Service (its
`caCertificateRefs` the Secret, whose ca.crt Coxswain reads; its `hostname` proxy-ssl-name); the
client certificate is a Gateway's `spec.tls.backend.clientCertificateRef`, one per Gateway
rather than per backend, which the notes say.
"""

from __future__ import annotations

from typing import Any

from coxswain_controller.translate.ingress.plans import IngressPlan

__all__ = ["tls_part"]

GATEWAY_API = "gateway.networking.k8s.io/v1"


def tls_part(plan: IngressPlan) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """(manifests by report key, notes) for the Ingress's TLS annotations."""
    manifests: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    if plan.policy.backend_tls is not None and plan.backend_tls is not None:
        manifests["backendTLSPolicies"] = _backend_policies(plan)
        if plan.backend_tls.client_certificate is not None:
            notes.append(
                "proxy-ssl-secret's tls.crt and tls.key: the Gateway's "
                "spec.tls.backend.clientCertificateRef presents a client certificate to every "
                "backend of the Gateway's routes, not to this Service's alone"
            )
    return manifests, notes


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
