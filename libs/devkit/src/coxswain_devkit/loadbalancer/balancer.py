"""`LoadBalancer`: each `type: LoadBalancer` Service gets a loopback address and its ports relayed.

    async with LoadBalancer(api.url) as lb:     # or: coxswain-devkit lb --api-server URL
        ...                                      # status.loadBalancer.ingress[0].ip appears

What a cloud provider's load-balancer controller and kube-proxy do together, on one machine:
one level-triggered loop, woken by watches on Services and EndpointSlices, gives each
LoadBalancer Service an address from 127.0.200.0/24 (its `spec.loadBalancerIP` if that is a
loopback address free to take, else the one it had, else the lowest free one), writes it to
`status.loadBalancer.ingress`, and relays TCP and UDP on every Service port to the ready
endpoints its EndpointSlices list (the slice port with the Service port's name). A Service with
a `loadBalancerClass` belongs to another implementation and is left alone, as the field means.

A port below 1024 needs root or a lowered `net.ipv4.ip_unprivileged_port_start`. Binding is
tried; refused, the port is served at `port + low_port_offset` instead, the Service is annotated
`coxswain-devkit/port-offset: "<offset>"` so tools (the demo's printed commands) can find it,
and one log line says so. A Service deleted, or changed to another type, releases its address
and ports, and its status and annotation are cleared.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp

from coxswain_devkit import kube as k
from coxswain_devkit.addresses import LB_NETWORK, AddressPool, PoolExhausted
from coxswain_devkit.loadbalancer.relay import Address, Backends, TcpRelay, UdpRelay
from coxswain_service import tasks

__all__ = ["LoadBalancer", "PORT_OFFSET_ANNOTATION", "LOW_PORT_OFFSET"]

log = logging.getLogger("coxswain_devkit.loadbalancer")

Obj = dict[str, Any]
Key = tuple[str, str]
PortKey = tuple[int, str]  # (Service port, protocol)
PORT_OFFSET_ANNOTATION = "coxswain-devkit/port-offset"
LOW_PORT_OFFSET = 10000
SERVICES = k.path("services")
SLICES = k.path("endpointslices", group="discovery.k8s.io")
SERVICE_LABEL = "kubernetes.io/service-name"
RESYNC_SECONDS = 5.0
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


@dataclass
class _Balanced:
    """One Service's share of the load balancer."""

    uid: str  # the Service's uid: a Service recreated under the same name starts afresh
    address: str  # its loopback address
    relays: dict[PortKey, TcpRelay | UdpRelay] = field(default_factory=dict)
    offset: bool = False  # whether a low port is served at port + offset


def _is_ours(service: Obj) -> bool:
    spec = service.get("spec") or {}
    return spec.get("type") == "LoadBalancer" and not spec.get("loadBalancerClass")


def _preferred(service: Obj) -> str:
    """The address to try first: the one asked for, else the one it already has."""
    asked = (service.get("spec") or {}).get("loadBalancerIP") or ""
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    held = str(ingress[0].get("ip", "")) if ingress else ""
    for candidate in (asked, held):
        try:
            if candidate and ipaddress.ip_address(candidate) in _LOOPBACK:
                return candidate
        except ValueError:
            continue
    return ""


def _endpoints(service: Obj, port: Obj, slices: list[Obj]) -> list[Address]:
    """Ready endpoints for one Service port; serving terminating ones if none is ready."""
    meta = service["metadata"]
    ready: list[Address] = []
    draining: list[Address] = []
    for slice_ in slices:
        if slice_["metadata"].get("namespace") != meta["namespace"]:
            continue
        if (slice_["metadata"].get("labels") or {}).get(SERVICE_LABEL) != meta["name"]:
            continue
        numbers = [
            int(p["port"])
            for p in slice_.get("ports") or []
            if (p.get("name") or "") == (port.get("name") or "")
            and p.get("protocol", "TCP") == port.get("protocol", "TCP")
            and p.get("port") is not None
        ]
        for number in numbers[:1]:
            for endpoint in slice_.get("endpoints") or []:
                conditions = endpoint.get("conditions") or {}
                where = [(str(a), number) for a in endpoint.get("addresses") or []]
                if conditions.get("ready") is not False:
                    ready += where
                elif conditions.get("serving"):
                    draining += where
    return sorted(set(ready or draining))


class LoadBalancer:
    def __init__(
        self,
        api_url: str,
        *,
        network: str = LB_NETWORK,
        low_port_offset: int = LOW_PORT_OFFSET,
        low_ports: bool | None = None,
        udp_idle: float = 30.0,
        resync: float = RESYNC_SECONDS,
    ) -> None:
        self._kube = k.Kube(api_url)
        self._pool = AddressPool(network)
        self.low_port_offset = low_port_offset
        self._low_ports = low_ports  # None: try binding; False: always offset (tests)
        self._udp_idle = udp_idle
        self._resync = resync
        self._changes = k.Changes(self._kube, (SERVICES, SLICES))
        self._balanced: dict[Key, _Balanced] = {}
        self._loop: asyncio.Task[None] | None = None

    def address(self, namespace: str, name: str) -> str | None:
        balanced = self._balanced.get((namespace, name))
        return balanced.address if balanced is not None else None

    async def start(self) -> LoadBalancer:
        await self._kube.__aenter__()
        self._changes.start()
        self._loop = tasks.spawn(self._reconcile_forever(), name="load balancer")
        log.info("load balancer started", extra={"fields": {"network": str(self._pool.network)}})
        return self

    async def stop(self) -> None:
        if self._loop is not None:
            await tasks.cancel(self._loop)
            self._loop = None
        await self._changes.stop()
        for balanced in self._balanced.values():
            await self._close(balanced, set(balanced.relays))
        self._balanced.clear()
        self._pool.release_all()
        await self._kube.close()
        log.info("load balancer stopped")

    async def __aenter__(self) -> LoadBalancer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _reconcile_forever(self) -> None:
        while True:
            await self._changes.wait(self._resync)
            try:
                await self._reconcile()
            except (aiohttp.ClientError, k.ApiError, OSError, TimeoutError) as err:
                log.warning("load balancer reconcile failed", extra={"fields": {"error": str(err)}})

    async def _reconcile(self) -> None:
        services = await self._kube.items(SERVICES)
        slices = await self._kube.items(SLICES)
        by_key = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
        for key, balanced in list(self._balanced.items()):
            service = by_key.get(key)
            if (
                service is None
                or not _is_ours(service)
                or service["metadata"]["uid"] != balanced.uid
            ):
                await self._release(key, service)
        for key, service in by_key.items():
            if _is_ours(service):
                await self._balance(key, service, slices)

    async def _balance(self, key: Key, service: Obj, slices: list[Obj]) -> None:
        balanced = self._balanced.get(key)
        if balanced is None:
            try:
                address = self._pool.allocate(_preferred(service))
            except PoolExhausted as err:
                log.warning(
                    "no load balancer address left",
                    extra={"fields": {"service": key, "error": str(err)}},
                )
                return
            balanced = self._balanced[key] = _Balanced(service["metadata"]["uid"], address)
            log.info(
                "load balancer address assigned",
                extra={"fields": {"service": "/".join(key), "address": address}},
            )
        ports = {
            (int(p["port"]), str(p.get("protocol", "TCP"))): p
            for p in (service.get("spec") or {}).get("ports") or []
        }
        await self._close(balanced, set(balanced.relays) - set(ports))
        for port_key, port in ports.items():
            relay = balanced.relays.get(port_key) or await self._open(key, balanced, port_key)
            if relay is not None:
                relay.backends.set(_endpoints(service, port, slices))
        await self._publish(key, service, balanced)

    async def _open(
        self, key: Key, balanced: _Balanced, port_key: PortKey
    ) -> TcpRelay | UdpRelay | None:
        port, protocol = port_key
        fields: Obj = {"service": "/".join(key), "address": balanced.address, "port": port}
        if protocol not in ("TCP", "UDP"):
            log.warning("protocol not relayed", extra={"fields": {**fields, "protocol": protocol}})
            return None
        relay: TcpRelay | UdpRelay = (
            TcpRelay(Backends()) if protocol == "TCP" else UdpRelay(Backends(), idle=self._udp_idle)
        )
        try:
            bound = await self._bind(relay, balanced.address, port)
        except OSError as err:
            log.warning(
                "load balancer port not bound", extra={"fields": {**fields, "error": str(err)}}
            )
            return None
        if bound != port:
            balanced.offset = True
            log.warning(
                "a port below 1024 cannot be bound here (not root, and "
                "net.ipv4.ip_unprivileged_port_start is higher): serving it at port + offset",
                extra={"fields": {**fields, "bound": bound, "annotation": PORT_OFFSET_ANNOTATION}},
            )
        balanced.relays[port_key] = relay
        log.info("load balancer listening", extra={"fields": {**fields, "bound": bound}})
        return relay

    async def _bind(self, relay: TcpRelay | UdpRelay, address: str, port: int) -> int:
        """The port bound: `port`, or `port + offset` when a low port is refused."""
        if port >= 1024 or self._low_ports is not False:
            try:
                await relay.start(address, port)
                return port
            except PermissionError:
                if port >= 1024:
                    raise
        await relay.start(address, port + self.low_port_offset)
        return port + self.low_port_offset

    async def _close(self, balanced: _Balanced, port_keys: set[PortKey]) -> None:
        for port_key in port_keys:
            await balanced.relays.pop(port_key).close()

    async def _publish(self, key: Key, service: Obj, balanced: _Balanced) -> None:
        ingress = [{"ip": balanced.address, "ipMode": "VIP"}]
        await self._write(
            key, service, ingress, str(self.low_port_offset) if balanced.offset else None
        )

    async def _release(self, key: Key, service: Obj | None) -> None:
        balanced = self._balanced.pop(key)
        await self._close(balanced, set(balanced.relays))
        self._pool.release(balanced.address)
        log.info(
            "load balancer address released",
            extra={"fields": {"service": "/".join(key), "address": balanced.address}},
        )
        if service is not None and service["metadata"]["uid"] == balanced.uid:
            await self._write(key, service, None, None)

    async def _write(
        self, key: Key, service: Obj, ingress: list[Obj] | None, offset: str | None
    ) -> None:
        """The Service's `status.loadBalancer.ingress` and port-offset annotation, if they differ.

        Merge patches: a list is replaced whole, and null removes a key, so each is one write
        and nothing else in the Service is touched."""
        annotations = service["metadata"].get("annotations") or {}
        held = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress")
        try:
            if annotations.get(PORT_OFFSET_ANNOTATION) != offset:
                annotate = {"metadata": {"annotations": {PORT_OFFSET_ANNOTATION: offset}}}
                await self._kube.merge_patch(k.path("services", *key), annotate)
            if held != ingress:
                status = {"status": {"loadBalancer": {"ingress": ingress}}}
                await self._kube.merge_patch(k.path("services", *key, "status"), status)
        except k.ApiError as err:
            if err.code not in (404, 409):
                raise
            self._changes.poke()
