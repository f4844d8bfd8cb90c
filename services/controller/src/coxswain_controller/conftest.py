"""A real discovery server on 127.0.0.1 with mTLS, and proxies that talk to it.

Certificates are minted per test (`coxswain_devkit.pki`); the server is the real grpc.aio
server with the real `DiscoveryService`; clients open real streams with SVID client certs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import kubernetes
import pytest

from coxswain_controller.discovery.credentials import (
    CertificateAuthority as CA,
)
from coxswain_controller.discovery.credentials import (
    mint_serving_certificate,
    server_credentials,
)
from coxswain_controller.discovery.nodes import NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.discovery.server import DiscoveryService
from coxswain_controller.leader.leadership import Leadership
from coxswain_controller.translate.scopes import Identity
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority, Issued, spiffe_id
from coxswain_proto import discovery as pb
from coxswain_proto import rpc

TRUST_DOMAIN = "cluster.local"
SHARED = Identity("coxswain-system", "coxswain-proxy")


@dataclass
class Controller:
    ca: CertificateAuthority
    port: int
    registry: SnapshotRegistry
    nodes: NodeRegistry
    leadership: Leadership
    channels: list[grpc.aio.Channel] = field(default_factory=list)

    def svid(self, namespace: str = SHARED.namespace, sa: str = SHARED.service_account) -> Issued:
        return self.ca.issue(uris=[spiffe_id(TRUST_DOMAIN, namespace, sa)])

    def channel(self, cert: Issued, *, trust: bytes | None = None) -> grpc.aio.Channel:
        creds = grpc.ssl_channel_credentials(
            trust or self.ca.certificate_pem, cert.key_pem, cert.chain_pem
        )
        channel = grpc.aio.secure_channel(
            f"127.0.0.1:{self.port}",
            creds,
            options=[("grpc.ssl_target_name_override", "localhost")],
        )
        self.channels.append(channel)
        return channel

    def open(self, cert: Issued | None = None) -> Any:
        """A stream call to write to and read from: `await call.write(...)`, `await call.read()`."""
        return rpc.discovery_stream(self.channel(cert or self.svid()))()


def subscribe(
    node_id: str = "proxy-1", *, scope: pb.Scope | None = None, wire_version: int = rpc.WIRE_VERSION
) -> pb.ProxyMessage:
    return pb.ProxyMessage(
        subscribe=pb.Subscribe(node_id=node_id, wire_version=wire_version, scope=scope)
    )


@pytest.fixture
async def controller() -> AsyncIterator[Controller]:
    ca = CertificateAuthority.create()
    serving = mint_serving_certificate(CA(ca.certificate_pem, ca.key_pem), dns_names=["localhost"])
    registry, nodes, leadership = SnapshotRegistry(), NodeRegistry(), Leadership(leader=True)
    service = DiscoveryService(
        registry=registry,
        nodes=nodes,
        leadership=leadership,
        trust_domain=TRUST_DOMAIN,
        shared_proxy=SHARED,
        subscribe_timeout=5.0,
    )
    server = grpc.aio.server()
    service.add_to(server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(serving))
    await server.start()
    running = Controller(ca, port, registry, nodes, leadership)
    try:
        yield running
    finally:
        for channel in running.channels:
            await channel.close()
        await server.stop(None)


@pytest.fixture
async def client(api: ThreadedApiServer) -> AsyncIterator[Any]:
    """The real `kubernetes` client talking to the test module's `api` emulator."""
    api_client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url))
    try:
        yield api_client
    finally:
        await asyncio.to_thread(api_client.close)
