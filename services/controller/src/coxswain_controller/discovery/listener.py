"""Starting and stopping the discovery listener (port 50051) from the controller's `serve`."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import grpc.aio

from coxswain_controller.discovery.credentials import (
    CertificateAuthority,
    mint_serving_certificate,
    server_credentials,
)
from coxswain_controller.discovery.nodes import NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.discovery.server import DiscoveryService
from coxswain_controller.leader.leadership import Leadership
from coxswain_controller.translate.scopes import Identity
from coxswain_proto import rpc

log = logging.getLogger(__name__)

__all__ = ["DiscoverySettings", "start"]

# What a proxy sends is small: the largest well-formed message is a NodeStatus naming
# `validate.BOUND_MAX` ports, about 1 MiB. Anything larger is refused by grpc
# (RESOURCE_EXHAUSTED) before it is read into a message at all.
MAX_PROXY_MESSAGE_BYTES = 2 * 1024 * 1024

# Stream keepalives let a proxy notice a dead controller (and a controller a dead proxy)
# without waiting for TCP to time out.
_OPTIONS = [
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.max_send_message_length", rpc.MAX_SNAPSHOT_BYTES),
    ("grpc.max_receive_message_length", MAX_PROXY_MESSAGE_BYTES),
]


@dataclass(frozen=True, slots=True)
class DiscoverySettings:
    address: str
    port: int
    ca: CertificateAuthority
    dns_names: tuple[str, ...]
    trust_domain: str
    shared_proxy: Identity


async def start(
    settings: DiscoverySettings,
    *,
    registry: SnapshotRegistry,
    nodes: NodeRegistry,
    leadership: Leadership,
) -> tuple[grpc.aio.Server, int]:
    serving = mint_serving_certificate(
        settings.ca,
        dns_names=settings.dns_names,
        spiffe_id=f"spiffe://{settings.trust_domain}/ns/coxswain-system/sa/coxswain-controller",
    )
    server = grpc.aio.server(options=_OPTIONS)
    DiscoveryService(
        registry=registry,
        nodes=nodes,
        leadership=leadership,
        trust_domain=settings.trust_domain,
        shared_proxy=settings.shared_proxy,
    ).add_to(server)
    port = server.add_secure_port(
        f"{settings.address}:{settings.port}", server_credentials(serving)
    )
    await server.start()
    log.info("discovery listening", extra={"fields": {"address": settings.address, "port": port}})
    return server, port
