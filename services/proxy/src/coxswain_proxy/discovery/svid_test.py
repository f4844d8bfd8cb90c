"""SVID bootstrap against an in-test identity service over real server-auth TLS.

Covers: an SVID is obtained for the proxy's own key and verified against the mounted bundle;
refusals: an SVID signed by another CA, one without a SPIFFE URI, one for another key, an
identity server whose certificate does not chain to the bundle, a missing or refused token.
Leaves out when renewal happens (renewal_test.py).
"""

from __future__ import annotations

import time

import grpc.aio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy import testkit
from coxswain_proxy.conftest import Trust, issuer_for
from coxswain_proxy.discovery import failures, svid


async def start(
    trust: Trust,
    servers: list[grpc.aio.Server],
    *,
    signer: CertificateAuthority,
    spiffe: str = testkit.PROXY_ID,
    serving_ca: CertificateAuthority | None = None,
) -> testkit.Identity:
    service = testkit.Identity(signer=signer, now=time.time, spiffe=spiffe)
    servers.append(await testkit.start_identity(serving_ca or trust.ca, service))
    return service


async def test_obtains_an_svid_for_its_own_key_verified_against_the_bundle(
    trust: Trust, identity: testkit.Identity
) -> None:
    obtained = await issuer_for(trust, identity.port, svid.SystemClock()).obtain()

    assert obtained.spiffe_id == testkit.PROXY_ID
    [issued] = identity.issued
    leaf = x509.load_pem_x509_certificate(obtained.chain_pem)
    assert leaf == issued
    key = serialization.load_pem_private_key(obtained.key_pem, password=None)
    assert key.public_key() == leaf.public_key()
    assert obtained.not_before < obtained.renew_at < obtained.not_after
    assert obtained.trust_bundle_pem == trust.ca.certificate_pem


async def test_refuses_an_svid_that_does_not_chain_to_the_bundle(
    trust: Trust, servers: list[grpc.aio.Server]
) -> None:
    rogue = await start(trust, servers, signer=CertificateAuthority.create("rogue"))
    with pytest.raises(failures.SvidRejected, match="does not chain"):
        await issuer_for(trust, rogue.port, svid.SystemClock()).obtain()


async def test_refuses_an_svid_without_a_spiffe_id(
    trust: Trust, servers: list[grpc.aio.Server]
) -> None:
    odd = await start(trust, servers, signer=trust.ca, spiffe="https://example.com/proxy")
    with pytest.raises(failures.SvidRejected, match="spiffe://"):
        await issuer_for(trust, odd.port, svid.SystemClock()).obtain()


async def test_refuses_an_identity_server_the_bundle_does_not_vouch_for(
    trust: Trust, servers: list[grpc.aio.Server]
) -> None:
    other = CertificateAuthority.create("other")
    impostor = await start(trust, servers, signer=trust.ca, serving_ca=other)
    with pytest.raises(failures.IssuanceFailed, match="UNAVAILABLE"):
        await issuer_for(trust, impostor.port, svid.SystemClock()).obtain()
    assert impostor.issued == []


async def test_a_refused_token_is_an_issuance_failure(
    trust: Trust, identity: testkit.Identity
) -> None:
    trust.token_path.write_text("someone else's token")
    with pytest.raises(failures.IssuanceFailed, match="UNAUTHENTICATED"):
        await issuer_for(trust, identity.port, svid.SystemClock()).obtain()


async def test_a_missing_token_is_named(trust: Trust, identity: testkit.Identity) -> None:
    trust.token_path.unlink()
    with pytest.raises(failures.TokenUnreadable, match=str(trust.token_path)):
        await issuer_for(trust, identity.port, svid.SystemClock()).obtain()


def test_refuses_a_certificate_issued_for_another_key(trust: Trust) -> None:
    key, _ = svid.new_key_and_csr()
    someone_else = trust.ca.issue(uris=[testkit.PROXY_ID])
    bundle = [trust.ca.certificate]
    with pytest.raises(failures.SvidRejected, match="not for the key"):
        svid.verify(someone_else.chain_pem, key, trust.ca.certificate_pem, bundle, time.time())


def test_refuses_an_expired_certificate(trust: Trust) -> None:
    key, _ = svid.new_key_and_csr()
    identity = testkit.Identity(signer=trust.ca, now=time.time, lifetime=60)
    leaf = identity._sign(key.public_key())
    pem = leaf.public_bytes(serialization.Encoding.PEM)
    later = time.time() + 3600
    with pytest.raises(failures.SvidRejected, match="not valid now"):
        svid.verify(pem, key, trust.ca.certificate_pem, [trust.ca.certificate], later)
