"""IssueSvid end to end against one replica: real TLS, real client, the devkit API emulator.

Covers each outcome: an issued SVID (chain, the SPIFFE ID as the only name whatever the CSR
asked for, lifetime, EKU), UNAUTHENTICATED for a bad, expired, wrong-audience or orphaned token,
PERMISSION_DENIED outside the allowlist, a dedicated proxy's `{gateway}-{gatewayclass}` allowed
once its Gateway exists, INVALID_ARGUMENT for unusable CSRs, UNAVAILABLE when the API server
fails or is down, and the counter per result. CA modes and rotation are in ca_modes_test.py;
CSR rules in detail in csr_test.py.
"""

from __future__ import annotations

import datetime
from typing import Any

import grpc
import kubernetes
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from prometheus_client import REGISTRY

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_identity import service, tokens
from coxswain_identity.conftest import (
    SHARED_PROXY,
    FakeClock,
    issue,
    make_csr,
    refused,
    token,
)

SPIFFE_SHARED = "spiffe://cluster.local/ns/coxswain-system/sa/coxswain-proxy"


def _count(result: str) -> float:
    value = REGISTRY.get_sample_value("coxswain_identity_svid_issuance_total", {"result": result})
    return value or 0.0


def _only_names(certificate: x509.Certificate) -> list[Any]:
    return list(certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


async def test_issues_an_svid_naming_only_the_service_account(
    replica: service.Service, core: Any
) -> None:
    before = _count("issued")
    csr = make_csr(
        dns=("evil.example.com",), uris=("spiffe://cluster.local/ns/x/sa/admin",), cn="root"
    )
    response = await issue(replica, token(core, SHARED_PROXY), csr)

    authority = replica.authority()
    assert authority is not None
    leaf = x509.load_pem_x509_certificates(response.certificate_chain_pem)[0]
    leaf.verify_directly_issued_by(authority.certificate)
    assert response.trust_bundle_pem == authority.certificate_pem
    assert _only_names(leaf) == [x509.UniformResourceIdentifier(SPIFFE_SHARED)]
    assert leaf.subject == x509.Name([])
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH}
    lifetime = leaf.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert abs(lifetime - datetime.timedelta(hours=24)) < datetime.timedelta(minutes=1)
    assert response.not_after_seconds == int(leaf.not_valid_after_utc.timestamp())
    assert _count("issued") == before + 1


def _expired(ctx: dict[str, Any]) -> str:
    ctx["clock"].now += 3601  # the emulator's clock: tokens live an hour
    return str(ctx["token"])


def _orphaned(ctx: dict[str, Any]) -> str:
    ctx["core"].delete_namespaced_service_account(SHARED_PROXY.name, SHARED_PROXY.namespace)
    return str(ctx["token"])


@pytest.mark.parametrize(
    ("spoil", "detail"),
    [
        pytest.param(lambda ctx: "not-a-token", "not authenticated", id="garbage-token"),
        pytest.param(lambda ctx: "", "no token", id="empty-token"),
        pytest.param(
            lambda ctx: token(ctx["core"], SHARED_PROXY, audience="https://kubernetes.default.svc"),
            "not authenticated",
            id="wrong-audience",
        ),
        pytest.param(_expired, "expired", id="expired-token"),
        pytest.param(
            _orphaned,
            "deleted",
            id="service-account-deleted",
        ),
    ],
)
async def test_refuses_tokens_the_api_server_does_not_authenticate(
    replica: service.Service, core: Any, clock: FakeClock, spoil: Any, detail: str
) -> None:
    before = _count("unauthenticated")
    bad = spoil({"core": core, "clock": clock, "token": token(core, SHARED_PROXY)})
    error = await refused(replica, bad, make_csr())
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert detail in error.details()
    assert _count("unauthenticated") == before + 1


async def test_refuses_a_service_account_outside_the_allowlist(
    replica: service.Service, core: Any
) -> None:
    before = _count("permission_denied")
    core.create_namespaced_service_account("default", {"metadata": {"name": "web"}})
    error = await refused(replica, token(core, tokens.ServiceAccount("default", "web")), make_csr())
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "default/web" in error.details()
    assert _count("permission_denied") == before + 1


async def test_allows_a_dedicated_proxy_once_its_gateway_exists(
    replica: service.Service, api: ThreadedApiServer, core: Any, kube_client: Any
) -> None:
    sa = tokens.ServiceAccount("default", "edge-coxswain")
    core.create_namespaced_service_account(sa.namespace, {"metadata": {"name": sa.name}})
    # Without the Gateway API served, only the shared proxy may hold an SVID.
    error = await refused(replica, token(core, sa), make_csr())
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED

    api.call(lambda server: server.apply(crds.standard()))
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "edge", "namespace": sa.namespace},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    }
    error = await refused(replica, token(core, sa), make_csr())
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    custom.create_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", sa.namespace, "gateways", gateway
    )
    response = await issue(replica, token(core, sa), make_csr())
    leaf = x509.load_pem_x509_certificates(response.certificate_chain_pem)[0]
    assert _only_names(leaf) == [
        x509.UniformResourceIdentifier("spiffe://cluster.local/ns/default/sa/edge-coxswain")
    ]

    custom.delete_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", sa.namespace, "gateways", "edge"
    )
    error = await refused(replica, token(core, sa), make_csr())
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED


def _bad_signature() -> bytes:
    pem = make_csr(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    csr = x509.load_pem_x509_csr(pem)
    der = bytearray(csr.public_bytes(serialization.Encoding.DER))
    der[-1] ^= 0xFF  # the last byte of the RSA signature
    return x509.load_der_x509_csr(bytes(der)).public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize(
    ("csr", "detail"),
    [
        pytest.param(
            lambda: b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n", "not a PEM", id="garbage"
        ),
        pytest.param(
            lambda: make_csr(rsa.generate_private_key(public_exponent=65537, key_size=1024)),  # noqa: S505 - weak on purpose
            "1024 bits",
            id="rsa-1024",
        ),
        pytest.param(_bad_signature, "signature", id="bad-signature"),
    ],
)
async def test_refuses_unusable_csrs(
    replica: service.Service, core: Any, csr: Any, detail: str
) -> None:
    before = _count("invalid_argument")
    error = await refused(replica, token(core, SHARED_PROXY), csr())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert detail in error.details()
    assert _count("invalid_argument") == before + 1


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda server: server.faults.fail_next(1), id="api-server-error"),
        pytest.param(lambda server: server.stop(), id="api-server-down"),
    ],
)
async def test_answers_unavailable_when_the_api_server_fails(
    replica: service.Service, api: ThreadedApiServer, core: Any, fault: Any
) -> None:
    before = _count("unavailable")
    good = token(core, SHARED_PROXY)
    api.call(fault)
    error = await refused(replica, good, make_csr())
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "Kubernetes API" in error.details()
    assert _count("unavailable") == before + 1
