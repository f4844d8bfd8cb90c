"""The load balancer against the emulator, with real sockets on 127.0.200.0/24.

Covers: a LoadBalancer Service gets an address of its own in `status.loadBalancer.ingress`
(`kubectl get svc` shows it), and TCP through it reaches the node agent's pods, in rotation;
UDP is relayed with each client's replies coming back to it; a connection to an endpoint that
refuses fails over to the next; `spec.loadBalancerIP` is honoured; when low ports may not be
bound the offset is applied and recorded on the Service; a Service deleted or turned into a
ClusterIP one releases its address and ports and its status is cleared. Relaying by
EndpointSlices means a test can point a Service at its own server by writing a slice, without
any pod.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.addresses import LB_NETWORK, AddressPool
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.loadbalancer import PORT_OFFSET_ANNOTATION, LoadBalancer
from coxswain_devkit.node import NodeAgent
from coxswain_devkit.node.conftest import (
    DEPLOYMENTS,
    Kubectl,
    agent,
    api,
    echo_deployment,
    kube,
    kubectl,
)
from coxswain_devkit.waiting import eventually

__all__ = ["agent", "api", "kube", "kubectl"]  # fixtures shared with the node agent's tests

Obj = dict[str, Any]
SERVICES = k.path("services", "default")
SLICES = k.path("endpointslices", "default", group="discovery.k8s.io")


@pytest.fixture
async def lb(api: ApiServer) -> AsyncIterator[LoadBalancer]:
    async with LoadBalancer(api.url, resync=1.0, udp_idle=5.0) as balancer:
        yield balancer


def _service(name: str, ports: list[Obj], **spec: Any) -> Obj:
    selector = {"selector": {"app": name}} if spec.pop("select", True) else {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": ports, **selector, **spec},
    }


def _slice(service: str, port: Obj, addresses: list[str]) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-test", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [port],
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
    }


async def _address(kube: k.Kube, name: str) -> str:
    async def assigned() -> str | None:
        service = await kube.get(f"{SERVICES}/{name}") or {}
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        return str(ingress[0]["ip"]) if ingress else None

    return await eventually(assigned, what=f"an address for {name}")


async def _port(kube: k.Kube, name: str, port: int) -> int:
    """Where the Service's port is served: its number, or number + the recorded offset."""
    service = await kube.get(f"{SERVICES}/{name}") or {}
    offset = (service["metadata"].get("annotations") or {}).get(PORT_OFFSET_ANNOTATION)
    return port + int(offset) if offset and port < 1024 else port


async def _http(host: str, port: int) -> Obj | None:
    """One request on a new connection; the echo's JSON, or None if the connection failed."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        return None
    writer.write(b"GET /lb HTTP/1.1\r\nHost: lb.test\r\nConnection: close\r\n\r\n")
    try:
        raw = await reader.read()
    except OSError:
        return None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    answer: Obj | None = json.loads(body) if head.startswith(b"HTTP/1.1 200") else None
    return answer


async def test_tcp_reaches_the_pods_in_rotation(
    kube: k.Kube, agent: NodeAgent, lb: LoadBalancer, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=2))
    await kube.create(
        SERVICES, _service("web", [{"name": "http", "port": 80, "targetPort": "http"}])
    )
    address = await _address(kube, "web")
    assert ipaddress.ip_address(address) in ipaddress.ip_network(LB_NETWORK)
    port = await _port(kube, "web", 80)

    async def both() -> set[str] | None:
        answers = [await _http(address, port) for _ in range(4)]
        pods = {a["pod"] for a in answers if a is not None}
        return pods if len(pods) == 2 and None not in answers else None

    pods = await eventually(both, what="requests through the address to reach both pods")
    row = (await kubectl("get", "svc", "web")).splitlines()[1].split()
    assert (row[1], row[3], row[4]) == ("LoadBalancer", address, "80/TCP")
    assert all(p.startswith("web-") for p in pods)
    assert lb.address("default", "web") == address


async def test_a_refused_endpoint_fails_over(kube: k.Kube, lb: LoadBalancer) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"pod": "live"}'
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        writer.close()

    # The dead endpoint is the live one's port on 127.0.0.2, where nothing listens: refused.
    live = await asyncio.start_server(answer, "127.0.0.1", 0)
    live_port = live.sockets[0].getsockname()[1]
    try:
        port = {"name": "http", "port": live_port, "protocol": "TCP"}
        await kube.create(SLICES, _slice("mixed", port, ["127.0.0.2", "127.0.0.1"]))
        ports = [{"name": "http", "port": 8081}]
        await kube.create(SERVICES, _service("mixed", ports, select=False))
        address = await _address(kube, "mixed")

        async def all_answered() -> bool:
            answers = [await _http(address, 8081) for _ in range(4)]
            return all(a == {"pod": "live"} for a in answers)

        await eventually(all_answered, what="every connection to reach the live endpoint")
    finally:
        live.close()
        await live.wait_closed()


class _UdpEcho(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.transport.sendto(b"echo:" + data, addr)


class _UdpClient(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.replies.put_nowait(data)


async def test_udp_is_relayed_to_each_client(kube: k.Kube, lb: LoadBalancer) -> None:
    loop = asyncio.get_running_loop()
    echo, _ = await loop.create_datagram_endpoint(_UdpEcho, local_addr=("127.0.0.1", 0))
    echo_port = echo.get_extra_info("sockname")[1]
    clients = []
    try:
        dns = {"name": "dns", "port": echo_port, "protocol": "UDP"}
        await kube.create(SLICES, _slice("dns", dns, ["127.0.0.1"]))
        ports = [{"name": "dns", "port": 53, "protocol": "UDP"}]
        await kube.create(SERVICES, _service("dns", ports, select=False))
        address = await _address(kube, "dns")
        port = await _port(kube, "dns", 53)
        for _ in range(2):
            transport, client = await loop.create_datagram_endpoint(
                _UdpClient, remote_addr=(address, port)
            )
            clients.append((transport, client))

        async def relayed() -> bool:
            for i, (transport, _) in enumerate(clients):
                transport.sendto(b"q%d" % i)
            try:
                async with asyncio.timeout(0.5):
                    got = [await c.replies.get() for _, c in clients]
            except TimeoutError:
                return False  # the relay may not have its endpoints yet: ask again
            return got == [b"echo:q0", b"echo:q1"]

        await eventually(relayed, what="each client's datagram answered to that client")
    finally:
        for transport, _ in clients:
            transport.close()
        echo.close()


async def test_low_ports_get_the_offset_and_it_is_recorded(api: ApiServer, kube: k.Kube) -> None:
    server = await asyncio.start_server(_ok, "127.0.0.1", 0)
    backend = server.sockets[0].getsockname()[1]
    try:
        async with LoadBalancer(api.url, low_ports=False, low_port_offset=20000, resync=1.0):
            http = {"name": "http", "port": backend, "protocol": "TCP"}
            await kube.create(SLICES, _slice("low", http, ["127.0.0.1"]))
            await kube.create(
                SERVICES, _service("low", [{"name": "http", "port": 80}], select=False)
            )
            address = await _address(kube, "low")

            async def annotated() -> str | None:
                service = await kube.get(f"{SERVICES}/low") or {}
                return (service["metadata"].get("annotations") or {}).get(PORT_OFFSET_ANNOTATION)

            assert await eventually(annotated, what="the port-offset annotation") == "20000"
            answer = await eventually(lambda: _http(address, 20080), what="the offset port")
            assert answer == {"pod": "low"}
    finally:
        server.close()
        await server.wait_closed()


async def _ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n{"pod": "low"}')
    writer.close()


async def test_addresses_are_released_and_loadbalancer_ip_honoured(
    kube: k.Kube, lb: LoadBalancer
) -> None:
    ports = [{"name": "http", "port": 8082}]
    await kube.create(SERVICES, _service("asked", ports, loadBalancerIP="127.0.200.250"))
    assert await _address(kube, "asked") == "127.0.200.250"
    await kube.create(SERVICES, _service("other", ports))
    other = await _address(kube, "other")

    await kube.merge_patch(f"{SERVICES}/asked", {"spec": {"type": "ClusterIP"}})

    async def cleared() -> bool:
        service = await kube.get(f"{SERVICES}/asked") or {}
        return not ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")

    await eventually(cleared, what="the status of a Service no longer a LoadBalancer")
    await kube.delete(f"{SERVICES}/other")
    pool = AddressPool(LB_NETWORK)
    for address in ("127.0.200.250", other):
        await eventually(functools.partial(_claimed, pool, address), what=f"{address} freed")
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection(address, 8082)
    pool.release_all()


async def _claimed(pool: AddressPool, address: str) -> bool:
    return pool.claim(address)
