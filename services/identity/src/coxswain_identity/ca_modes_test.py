"""The CA's life: created once by racing replicas, required in external mode, followed on change.

Covers: two replicas starting together in `auto` mode end up with one CA (the Secret's) and the
trust ConfigMap holds it; `external` mode serves nothing (UNAVAILABLE, /readyz reason naming the
Secret) until the Secret appears, then issues from it; a changed Secret makes new SVIDs and the
listener's certificate chain to the new CA and updates the ConfigMap; deleting an external
Secret fails closed again; an unusable Secret is refused. Leaves out the watch's relist paths,
which the devkit's watch tests exercise from the client side.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import grpc
from cryptography import x509
from prometheus_client import REGISTRY

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_identity import ca, service, trust
from coxswain_identity.conftest import (
    CA_SECRET,
    NAMESPACE,
    SHARED_PROXY,
    eventually,
    issue,
    make_csr,
    refused,
    running,
    settings,
    token,
)
from coxswain_service.readiness import Readiness


def _secret(authority: CertificateAuthority, **extra: bytes) -> dict[str, Any]:
    data = {"tls.crt": authority.certificate_pem, "tls.key": authority.key_pem, **extra}
    return {
        "metadata": {"name": CA_SECRET.name, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


def _trust(core: Any) -> str | None:
    try:
        configmap = core.read_namespaced_config_map(trust.TRUST_CONFIGMAP, NAMESPACE)
    except Exception:  # noqa: BLE001 - not there yet
        return None
    return str((configmap.data or {}).get(trust.TRUST_KEY))


def _count(result: str) -> float:
    labels = {"result": result}
    return REGISTRY.get_sample_value("coxswain_identity_svid_issuance_total", labels) or 0.0


def _leaf(chain_pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificates(chain_pem)[0]


async def test_replicas_starting_together_share_one_created_ca(
    api: ThreadedApiServer, core: Any, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="coxswain_identity")
    replicas = [service.Service(settings(api), Readiness()) for _ in range(2)]
    try:
        await asyncio.gather(*(replica.start() for replica in replicas))
        a, b = [await eventually(replica.authority) for replica in replicas]
        await _one_ca(core, replicas, a, b)
    finally:
        await asyncio.gather(*(replica.stop() for replica in replicas))
    created = [r for r in caplog.records if r.getMessage() == "certificate authority created"]
    assert len(created) == 1, "AlreadyExists lets exactly one replica's CA in"


async def _one_ca(core: Any, replicas: list[service.Service], a: Any, b: Any) -> None:
    """Both replicas use the Secret's CA, the bundle holds it, and each issues under it."""
    assert a.fingerprint == b.fingerprint
    stored = ca.read(core, CA_SECRET)
    assert stored.fingerprint == a.fingerprint
    await eventually(lambda: _trust(core) == a.certificate_pem.decode())
    for replica in replicas:
        response = await issue(replica, token(core, SHARED_PROXY), make_csr())
        _leaf(response.certificate_chain_pem).verify_directly_issued_by(stored.certificate)


async def test_external_mode_fails_closed_until_the_secret_appears(
    api: ThreadedApiServer, core: Any
) -> None:
    readiness = Readiness()
    operator_ca = CertificateAuthority.create("operator CA")
    async with running(api, readiness, ca_mode=ca.Mode.EXTERNAL) as replica:
        await eventually(lambda: any("not found" in r for r in readiness.reasons))
        assert any(str(CA_SECRET) in reason for reason in readiness.reasons)
        # The listener shows a certificate no bundle holds: the handshake itself fails.
        error = await refused(
            replica, token(core, SHARED_PROXY), make_csr(), trust=operator_ca.certificate_pem
        )
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert _trust(core) is None, "nothing is published without a CA"

        core.create_namespaced_secret(NAMESPACE, _secret(operator_ca))
        await eventually(replica.authority)
        assert readiness.reasons == []
        response = await issue(replica, token(core, SHARED_PROXY), make_csr())
        _leaf(response.certificate_chain_pem).verify_directly_issued_by(operator_ca.certificate)

        core.delete_namespaced_secret(CA_SECRET.name, NAMESPACE)
        await eventually(lambda: replica.authority() is None)
        unavailable = _count("unavailable")
        error = await refused(
            replica, token(core, SHARED_PROXY), make_csr(), trust=operator_ca.certificate_pem
        )
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert "no certificate authority" in error.details()
        assert _count("unavailable") == unavailable + 1


async def test_a_changed_secret_rotates_svids_listener_and_bundle(
    api: ThreadedApiServer, core: Any
) -> None:
    old, new = CertificateAuthority.create("old CA"), CertificateAuthority.create("new CA")
    core.create_namespaced_secret(NAMESPACE, _secret(old))
    async with running(api, ca_mode=ca.Mode.EXTERNAL) as replica:
        await eventually(replica.authority)
        await eventually(lambda: _trust(core) == old.certificate_pem.decode())

        core.replace_namespaced_secret(CA_SECRET.name, NAMESPACE, _secret(new))
        await eventually(lambda: _trust(core) == new.certificate_pem.decode())
        # The listener's certificate now chains to the new CA only.
        response = await issue(
            replica, token(core, SHARED_PROXY), make_csr(), trust=new.certificate_pem
        )
        _leaf(response.certificate_chain_pem).verify_directly_issued_by(new.certificate)
        assert response.trust_bundle_pem == new.certificate_pem
        error = await refused(
            replica, token(core, SHARED_PROXY), make_csr(), trust=old.certificate_pem
        )
        assert error.code() == grpc.StatusCode.UNAVAILABLE


async def test_an_extra_ca_crt_is_the_published_bundle(api: ThreadedApiServer, core: Any) -> None:
    """An operator overlapping a rotation puts old and new CAs in ca.crt; both are trusted."""
    old, new = CertificateAuthority.create("old CA"), CertificateAuthority.create("new CA")
    bundle = new.certificate_pem + old.certificate_pem
    core.create_namespaced_secret(NAMESPACE, _secret(new, **{"ca.crt": bundle}))
    async with running(api, ca_mode=ca.Mode.EXTERNAL) as replica:
        await eventually(lambda: _trust(core) == bundle.decode())
        response = await issue(replica, token(core, SHARED_PROXY), make_csr(), trust=bundle)
        assert response.trust_bundle_pem == bundle


async def test_an_unusable_secret_is_refused(api: ThreadedApiServer, core: Any) -> None:
    leafy = CertificateAuthority.create("real CA").issue(dns=["not-a-ca"])
    body = _secret(CertificateAuthority.create("x"))
    body["data"]["tls.crt"] = base64.b64encode(leafy.certificate_pem).decode()
    body["data"]["tls.key"] = base64.b64encode(leafy.key_pem).decode()
    core.create_namespaced_secret(NAMESPACE, body)
    readiness = Readiness()
    async with running(api, readiness) as replica:
        await eventually(lambda: any("not a CA" in r for r in readiness.reasons))
        assert replica.authority() is None
        # auto mode never overwrites a Secret that exists, even an unusable one.
        stored = core.read_namespaced_secret(CA_SECRET.name, NAMESPACE)
        assert stored.data["tls.crt"] == body["data"]["tls.crt"]
