"""Fixtures for the identity's tests: the devkit API emulator, the real client, running replicas.

Everything is real: the `kubernetes` client talks HTTP to the emulator, IssueSvid goes over
grpc.aio with TLS on 127.0.0.1, keys and CSRs are made here. Waiting is on conditions, polled.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import kubernetes
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_identity import ca, server, service, tokens
from coxswain_proto import identity, rpc
from coxswain_service.readiness import Readiness

NAMESPACE = "coxswain-system"
CA_SECRET = ca.ObjectRef(NAMESPACE, "coxswain-discovery-ca")
SHARED_PROXY = tokens.ServiceAccount(NAMESPACE, "coxswain-proxy")
AUDIENCE = "coxswain-discovery"
WAIT_SECONDS = 30.0


class FakeClock:
    """The emulator's clock, moved by hand (token expiry)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def eventually(predicate: Callable[[], Any], *, within: float = WAIT_SECONDS) -> Any:
    """Wait until `predicate()` is truthy (checked every few ms) and return its value."""
    deadline = time.monotonic() + within
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s: {predicate}")
        await asyncio.sleep(0.01)
    return value


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api(clock: FakeClock) -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer(clock=clock) as server_:
        yield server_


@pytest.fixture
def kube_client(api: ThreadedApiServer) -> Iterator[Any]:
    with kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url)) as client:
        yield client


@pytest.fixture
def core(kube_client: Any) -> Any:
    core_: Any = kubernetes.client.CoreV1Api(kube_client)
    core_.create_namespace({"metadata": {"name": NAMESPACE}})
    core_.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": SHARED_PROXY.name}})
    return core_


def settings(api: ThreadedApiServer, **overrides: Any) -> service.Settings:
    values: dict[str, Any] = {
        "address": "127.0.0.1",
        "port": 0,
        "ca_mode": ca.Mode.AUTO,
        "ca_secret": CA_SECRET,
        "serving_dns": ("localhost",),
        "policy": server.Policy("cluster.local", datetime.timedelta(hours=24)),
        "shared_proxy": SHARED_PROXY,
        "api_server": api.url,
    }
    values.update(overrides)
    return service.Settings(**values)


@asynccontextmanager
async def running(
    api: ThreadedApiServer, readiness: Readiness | None = None, **overrides: Any
) -> AsyncIterator[service.Service]:
    replica = service.Service(settings(api, **overrides), readiness or Readiness())
    try:
        await replica.start()
        yield replica
    finally:
        await replica.stop()


@pytest.fixture
async def replica(api: ThreadedApiServer, core: Any) -> AsyncIterator[service.Service]:
    async with running(api) as replica_:
        await eventually(replica_.authority)
        yield replica_


def token(core: Any, sa: tokens.ServiceAccount, *, audience: str = AUDIENCE) -> str:
    spec = {"spec": {"audiences": [audience], "expirationSeconds": 3600}}
    return str(
        core.create_namespaced_service_account_token(sa.name, sa.namespace, spec).status.token
    )


def make_csr(
    key: Any = None, *, dns: tuple[str, ...] = (), uris: tuple[str, ...] = (), cn: str = ""
) -> bytes:
    key = key or ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.UniformResourceIdentifier(u) for u in uris]
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, cn)] if cn else [])
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


async def issue(
    replica: service.Service | int, token_: str, csr_pem: bytes, *, trust: bytes | None = None
) -> identity.IssueSvidResponse:
    """IssueSvid over TLS to a replica (or a port), verifying the listener against `trust`
    (default: the replica's CA)."""
    if trust is None:
        assert isinstance(replica, service.Service)
        authority = replica.authority()
        assert authority is not None
        trust = authority.bundle_pem
    port = replica if isinstance(replica, int) else replica.port
    target = f"127.0.0.1:{port}"
    async with grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(trust)) as channel:
        request = identity.IssueSvidRequest(token=token_, csr_pem=csr_pem)
        response: identity.IssueSvidResponse = await rpc.issue_svid(channel)(request, timeout=20)
        return response


async def refused(replica: service.Service | int, token_: str, csr_pem: bytes, **kw: Any) -> Any:
    """The AioRpcError an IssueSvid call ends with."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await issue(replica, token_, csr_pem, **kw)
    return raised.value
