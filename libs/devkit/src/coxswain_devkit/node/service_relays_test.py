"""Service DNS names in dial flags, and the relays that stand in for their cluster IPs.

Covers: which names count (`<svc>.<ns>.svc[.cluster.local]:<port>` in host:port, URL and list
forms; not inside a longer name, not without a port) and their rewriting; a relay against the
emulator reaching the Service's ready endpoint over real TCP, following the slices when the
endpoint moves (as the discovery Service follows the leader), nothing for a name no Service has,
and the relay closed when its Service is deleted. The agent running pods with them is the
install e2e's (tests/e2e/install_test.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.node.service_relays import Reference, ServiceRelays, references, rewrite

SLICES = k.path("endpointslices", "default", group="discovery.k8s.io")


@pytest.mark.parametrize(
    ("value", "found"),
    [
        pytest.param("ctl.system.svc:50051", [Reference("system", "ctl", 50051)], id="host-port"),
        pytest.param(
            "https://ctl.system.svc.cluster.local:50051",
            [Reference("system", "ctl", 50051)],
            id="url-with-cluster-domain",
        ),
        pytest.param(
            "a.x.svc:1,b.y.svc:2", [Reference("x", "a", 1), Reference("y", "b", 2)], id="list"
        ),
        pytest.param("http://ui.x.svc:80/path", [Reference("x", "ui", 80)], id="url-path"),
        pytest.param("ctl.system.svc", [], id="no-port-is-a-certificate-name"),
        pytest.param("ctl.system.svc.example:1", [], id="inside-a-longer-name"),
        pytest.param("127.0.0.1:50051", [], id="an-address"),
    ],
)
def test_references(value: str, found: list[Reference]) -> None:
    assert references(value) == found


def test_rewrite_replaces_only_the_relayed() -> None:
    relayed = {Reference("x", "a", 1): "127.0.0.1:7"}
    assert rewrite("https://a.x.svc:1,b.y.svc:2", relayed) == "https://127.0.0.1:7,b.y.svc:2"


class _Named:
    """A TCP server that answers every connection with its own name."""

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.server: asyncio.Server | None = None

    async def start(self, host: str) -> int:
        async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(self.name)
            await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(answer, host, 0)
        return int(self.server.sockets[0].getsockname()[1])


async def _read(address: str) -> bytes:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        return await reader.read()
    finally:
        writer.close()


def _slice(address: str, port: int) -> k.Obj:
    return {
        "metadata": {"name": "ctl-1", "labels": {"kubernetes.io/service-name": "ctl"}},
        "addressType": "IPv4",
        "ports": [{"name": "grpc", "port": port}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


@pytest.fixture
async def kube() -> AsyncIterator[k.Kube]:
    async with ApiServer() as api, k.Kube(api.url) as client:
        yield client


async def test_a_relay_follows_its_services_endpoints(kube: k.Kube) -> None:
    leader, standby = _Named(b"leader"), _Named(b"standby")
    leader_port = await leader.start("127.0.0.1")
    standby_port = await standby.start("127.0.0.2")
    service = {"metadata": {"name": "ctl"}, "spec": {"ports": [{"name": "grpc", "port": 50051}]}}
    await kube.create(k.path("services", "default"), service)
    await kube.create(SLICES, _slice("127.0.0.1", leader_port))
    relays = ServiceRelays(kube)
    try:
        address = await relays.address(Reference("default", "ctl", 50051))
        assert address is not None and address.startswith("127.0.0.1:")
        assert await _read(address) == b"leader"
        assert await relays.address(Reference("default", "absent", 50051)) is None
        assert await relays.address(Reference("default", "ctl", 1)) is None  # no such port
        moved = {**_slice("127.0.0.2", standby_port), "metadata": {"name": "ctl-1"}}
        await kube.merge_patch(f"{SLICES}/ctl-1", moved)
        await _refresh(kube, relays)
        assert await _read(address) == b"standby"
        await kube.delete(k.path("services", "default", "ctl"))
        await _refresh(kube, relays)
        assert not relays
        with pytest.raises(ConnectionRefusedError):
            await _read(address)
    finally:
        await relays.close()
        for named in (leader, standby):
            assert named.server is not None
            named.server.close()


async def _refresh(kube: k.Kube, relays: ServiceRelays) -> None:
    await relays.refresh(await kube.items(k.path("services")), await kube.items(SLICES))
