"""Fixtures for the discovery client's tests: certificates, an identity service, controllers and
a running proxy client, each torn down even when the test fails (`testkit` has the servers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio
import pytest

from coxswain_devkit.pki import CertificateAuthority
from coxswain_proto import discovery as pb
from coxswain_proxy import testkit
from coxswain_proxy.discovery import endpoints, ports, svid
from coxswain_proxy.discovery.backoff import BackoffPolicy
from coxswain_proxy.discovery.client import ClientConfig, DiscoveryClient
from coxswain_proxy.discovery.clock import Clock, SystemClock
from coxswain_proxy.discovery.holder import RoutingHolder

# Short delays: the tests exercise the retry paths, not the production pacing.
FAST = BackoffPolicy(initial=0.01, maximum=0.05, holding_maximum=0.02)


@dataclass
class Trust:
    ca: CertificateAuthority
    bundle_path: Path
    token_path: Path


@pytest.fixture
def trust(tmp_path: Path) -> Trust:
    ca = CertificateAuthority.create()
    bundle, token = tmp_path / "ca.crt", tmp_path / "token"
    bundle.write_bytes(ca.certificate_pem)
    token.write_text(testkit.TOKEN + "\n")
    return Trust(ca, bundle, token)


@pytest.fixture
async def servers() -> AsyncIterator[list[grpc.aio.Server]]:
    """Every server a test starts, stopped at teardown."""
    started: list[grpc.aio.Server] = []
    yield started
    await asyncio.gather(*(s.stop(grace=None) for s in started))


@pytest.fixture
def clock() -> Clock:
    return SystemClock()


@pytest.fixture
async def identity(trust: Trust, servers: list[grpc.aio.Server], clock: Clock) -> testkit.Identity:
    service = testkit.Identity(signer=trust.ca, now=clock.now)
    servers.append(await testkit.start_identity(trust.ca, service))
    return service


StartController = Callable[[], Awaitable[testkit.Controller]]


@pytest.fixture
def start_controller(trust: Trust, servers: list[grpc.aio.Server]) -> StartController:
    async def start() -> testkit.Controller:
        controller = testkit.Controller()
        servers.append(await testkit.start_controller(trust.ca, controller))
        return controller

    return start


def issuer_for(trust: Trust, identity_port: int, clock: Clock) -> svid.SvidIssuer:
    config = svid.IssuerConfig(
        endpoints=(endpoints.Endpoint("127.0.0.1", identity_port),),
        token_path=trust.token_path,
        trust_bundle_path=trust.bundle_path,
        server_name="localhost",
    )
    return svid.SvidIssuer(config, clock)


@dataclass
class Proxy:
    client: DiscoveryClient
    holder: RoutingHolder
    binder: ports.PortBinder
    task: asyncio.Task[None]
    stopped: list[str] = field(default_factory=list)


StartProxy = Callable[..., Proxy]


@pytest.fixture
async def start_proxy(
    trust: Trust, identity: testkit.Identity, clock: Clock
) -> AsyncIterator[StartProxy]:
    started: list[Proxy] = []

    def start(
        *controller_ports: int, scope: pb.Scope | None = None, backoff: BackoffPolicy = FAST
    ) -> Proxy:
        config = ClientConfig(
            endpoints=tuple(endpoints.Endpoint("127.0.0.1", p) for p in controller_ports),
            node_id="proxy-1",
            scope=scope or pb.Scope(shared_pool=pb.ScopeSharedPool()),
            server_name="localhost",
            backoff=backoff,
        )
        holder, binder = RoutingHolder(), ports.PortBinder()
        stopped: list[str] = []
        client = DiscoveryClient(
            config,
            issuer=issuer_for(trust, identity.port, clock),
            holder=holder,
            bound=binder,
            clock=clock,
            on_stop=stopped.append,
        )
        task = asyncio.get_running_loop().create_task(client.run(), name="test-discovery")
        proxy = Proxy(client, holder, binder, task, stopped)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.task.cancel()
    await asyncio.gather(*(p.task for p in started), return_exceptions=True)
