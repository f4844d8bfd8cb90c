"""A Gateway's `spec.tls`: client certificate validation on its HTTPS ports (frontend), and the
client certificate it presents to backends (backend).

Where it sits: `gateway_states` reads this once a Gateway's listeners are validated and their
conflicts settled, so only listeners still served are checked; `finalize` turns what it found
into each HTTPS port's `ClientCaStore` and the Gateway's `backend_client_certificate`, and
`gateway_status` into conditions.

Frontend (Gateway API FrontendTLSConfig): "Default specifies the default client certificate
validation configuration for all Listeners handling HTTPS traffic, unless a per-port
configuration is defined"; a perPort entry "overrides the default configuration for all
Listeners handling HTTPS traffic that match this port", whole: an entry without validation
turns validation off on its port. A CA reference that is unusable leaves the listener's
ResolvedRefs False with InvalidCACertificateKind, RefNotPermitted or InvalidCACertificateRef;
"If ALL CACertificateRefs are invalid, the implementation MUST also ensure the Accepted
condition on the listener is set to status: False, with the Reason NoValidCACertificate", and
such a listener is not served. The usable references' certificates are the port's trust.

Backend (GatewayBackendTLS): an unusable clientCertificateRef sets the Gateway's ResolvedRefs
False, InvalidClientCertificateRef or RefNotPermitted, and backends are dialled without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from coxswain_controller.translate.backends.grants import Grants
from coxswain_controller.translate.conditions import ConditionType, Reason
from coxswain_controller.translate.gateways.certificates import (
    CA_KINDS,
    Certificate,
    load_ca_bundle,
    load_tls_secret,
)
from coxswain_controller.translate.inputs import Inputs, Obj, namespace, spec
from coxswain_controller.translate.result import Condition
from coxswain_routing import ClientValidationMode

__all__ = ["ClientValidation", "GatewayTls", "read_gateway_tls"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
_MODES = {m.value: m for m in ClientValidationMode}


@dataclass(frozen=True, slots=True)
class ClientValidation:
    """How one Gateway port checks its HTTPS clients' certificates."""

    ca_bundle_pem: bytes  # the usable references' certificates, in reference order
    sources: tuple[str, ...]  # "<Kind> <namespace>/<name>" of each usable reference, sorted
    mode: ClientValidationMode


@dataclass(slots=True)
class GatewayTls:
    """What a Gateway's spec.tls asks for, as far as it could be honoured."""

    validation: dict[int, ClientValidation] = field(default_factory=dict)  # by listener port
    insecure_ports: tuple[int, ...] = ()  # ports whose listeners admit every client
    backend_certificate: Certificate | None = None
    # The Gateway's ResolvedRefs when spec.tls.backend names a certificate (None: it names none).
    backend_refs: Condition | None = None


class Listener(Protocol):
    """What this module reads and writes of a listener (`gateway_states.ListenerState`)."""

    port: int
    protocol: str
    served: bool
    problems: list[Condition]


@dataclass(frozen=True, slots=True)
class _Read:
    """One port's validation as read: what can be honoured, and what cannot."""

    validation: ClientValidation | None  # None: nothing usable
    problems: tuple[tuple[Reason, str], ...] = ()


def read_gateway_tls(
    inputs: Inputs, gateway: Obj, listeners: Iterable[Listener], grants: Grants
) -> GatewayTls:
    """Read `spec.tls` of `gateway`; the served HTTPS listeners among `listeners` get the
    conditions their port's validation earns (and are unserved when it has no usable CA)."""
    tls = spec(gateway).get("tls") or {}
    result = GatewayTls()
    frontend = tls.get("frontend") or {}
    if frontend:
        _frontend(inputs, gateway, frontend, listeners, grants, result)
    backend = (tls.get("backend") or {}).get("clientCertificateRef")
    if backend:
        _backend(inputs, gateway, backend, grants, result)
    return result


# ------------------------------------------------------------------------------ frontend


def _port_configs(frontend: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[int, Any]]:
    default = frontend.get("default") or {}
    per_port = {int(p.get("port", 0)): p.get("tls") or {} for p in frontend.get("perPort") or []}
    return default, per_port


def _frontend(
    inputs: Inputs,
    gateway: Obj,
    frontend: Mapping[str, Any],
    listeners: Iterable[Listener],
    grants: Grants,
    result: GatewayTls,
) -> None:
    default, per_port = _port_configs(frontend)
    insecure: set[int] = set()
    read: dict[int, _Read] = {}
    for listener in listeners:
        if listener.protocol != "HTTPS" or not listener.served:
            continue
        validation = (per_port.get(listener.port, default) or {}).get("validation")
        if not validation:
            continue
        if listener.port not in read:
            read[listener.port] = _validation(inputs, gateway, validation, grants)
        found = read[listener.port]
        _judge(listener, found)
        if found.validation is not None and listener.served:
            result.validation[listener.port] = found.validation
            if found.validation.mode is ClientValidationMode.ALLOW_INSECURE_FALLBACK:
                insecure.add(listener.port)
    result.insecure_ports = tuple(sorted(insecure))


def _validation(
    inputs: Inputs, gateway: Obj, validation: Mapping[str, Any], grants: Grants
) -> _Read:
    written = str(validation.get("mode") or ClientValidationMode.ALLOW_VALID_ONLY.value)
    mode = _MODES.get(written)
    if mode is None:
        return _Read(None, ((Reason.UNSUPPORTED_VALUE, f"unknown validation mode {written!r}"),))
    bundle, sources, problems = b"", [], []
    for ref in validation.get("caCertificateRefs") or []:
        loaded = _ca_ref(inputs, gateway, ref, grants)
        if isinstance(loaded[0], Reason):
            problems.append((loaded[0], str(loaded[1])))
            continue
        bundle += loaded[0]
        sources.append(str(loaded[1]))
    if not sources:
        problems = problems or [(Reason.INVALID_CA_CERTIFICATE_REF, "no caCertificateRefs")]
        return _Read(None, tuple(problems))
    return _Read(ClientValidation(bundle, tuple(sorted(sources)), mode), tuple(problems))


def _judge(listener: Listener, found: _Read) -> None:
    """The listener's conditions for its port's validation."""
    if not found.problems:
        return
    reason = found.problems[0][0]
    message = "frontend validation: " + "; ".join(m for _, m in found.problems)
    if reason is Reason.UNSUPPORTED_VALUE:
        _unserve(listener, Reason.UNSUPPORTED_VALUE, message)
        return
    listener.problems.append(Condition(ConditionType.RESOLVED_REFS, False, reason, message))
    if found.validation is None:
        # No reference usable: the listener cannot check its clients, so it serves none.
        _unserve(listener, Reason.NO_VALID_CA_CERTIFICATE, message)


def _unserve(listener: Listener, reason: Reason, message: str) -> None:
    listener.served = False
    listener.problems.append(Condition(ConditionType.ACCEPTED, False, reason, message))


def _ca_ref(
    inputs: Inputs, gateway: Obj, ref: Mapping[str, Any], grants: Grants
) -> tuple[bytes, str] | tuple[Reason, str]:
    group, kind = ref.get("group") or "", str(ref.get("kind") or "")
    ref_ns = str(ref.get("namespace") or namespace(gateway))
    ref_name = str(ref.get("name", ""))
    if group or kind not in CA_KINDS:
        what = f"{group or 'core'}/{kind}"
        return Reason.INVALID_CA_CERTIFICATE_KIND, f"caCertificateRef kind {what} is not supported"
    if ref_ns != namespace(gateway) and not grants.permits(
        from_group=GATEWAY_GROUP,
        from_kind="Gateway",
        from_namespace=namespace(gateway),
        to_kind=kind,
        to_namespace=ref_ns,
        to_name=ref_name,
    ):
        return Reason.REF_NOT_PERMITTED, (
            f"no ReferenceGrant in {ref_ns} permits Gateway from {namespace(gateway)} "
            f"to {kind} {ref_name}"
        )
    holder = inputs.get(kind, ref_ns, ref_name)
    if holder is None:
        return Reason.INVALID_CA_CERTIFICATE_REF, f"{kind} {ref_ns}/{ref_name} not found"
    loaded = load_ca_bundle(holder, kind)
    if isinstance(loaded, str):
        return Reason.INVALID_CA_CERTIFICATE_REF, loaded
    return loaded, f"{kind} {ref_ns}/{ref_name}"


# ------------------------------------------------------------------------------- backend


def _backend(
    inputs: Inputs, gateway: Obj, ref: Mapping[str, Any], grants: Grants, result: GatewayTls
) -> None:
    loaded = _client_certificate(inputs, gateway, ref, grants)
    if isinstance(loaded, Certificate):
        result.backend_certificate = loaded
        result.backend_refs = Condition(
            ConditionType.RESOLVED_REFS, True, Reason.RESOLVED_REFS, "all references resolved"
        )
        return
    reason, message = loaded
    result.backend_refs = Condition(
        ConditionType.RESOLVED_REFS, False, reason, f"spec.tls.backend: {message}"
    )


def _client_certificate(
    inputs: Inputs, gateway: Obj, ref: Mapping[str, Any], grants: Grants
) -> Certificate | tuple[Reason, str]:
    group, kind = ref.get("group") or "", ref.get("kind") or "Secret"
    secret_ns = str(ref.get("namespace") or namespace(gateway))
    secret_name = str(ref.get("name", ""))
    invalid = Reason.INVALID_CLIENT_CERTIFICATE_REF
    if group or kind != "Secret":
        return invalid, f"clientCertificateRef kind {group or 'core'}/{kind} is not supported"
    if secret_ns != namespace(gateway) and not grants.permits(
        from_group=GATEWAY_GROUP,
        from_kind="Gateway",
        from_namespace=namespace(gateway),
        to_kind="Secret",
        to_namespace=secret_ns,
        to_name=secret_name,
    ):
        return Reason.REF_NOT_PERMITTED, (
            f"no ReferenceGrant in {secret_ns} permits Gateway from {namespace(gateway)} "
            f"to Secret {secret_name}"
        )
    secret = inputs.get("Secret", secret_ns, secret_name)
    if secret is None:
        return invalid, f"Secret {secret_ns}/{secret_name} not found"
    loaded = load_tls_secret(secret)
    return (invalid, loaded) if isinstance(loaded, str) else loaded
