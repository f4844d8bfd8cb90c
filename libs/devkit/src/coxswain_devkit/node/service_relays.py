"""Cluster DNS and Service IPs, as far as a pod's own flags need them: a relay per Service port.

In a cluster a pod dials another Service by name (`coxswain-controller-discovery.
coxswain-system.svc:50051`): cluster DNS answers the Service's cluster IP and kube-proxy relays
that to a ready endpoint. Neither exists on this machine, and a process here resolves names with
the machine's own resolver. So the node agent plays both for the flags a service dials with
(`images.Role.dial_flags`): each `<service>.<namespace>.svc[.cluster.local]:<port>` they name
gets a TCP relay on 127.0.0.1 (a port of its own), the flag is pointed at it instead, and the
relay follows the ready endpoints of the Service's EndpointSlices as kube-proxy does (serving
but terminating ones only when none is ready). A Service that selects its endpoints by a label
that moves (the controller's discovery Service follows the leader) is followed as it moves.

127.0.0.1 is an address every Coxswain serving certificate carries, so TLS through a relay
verifies as it would through the Service's name. A name no Service has is left as written (it
would not resolve in a cluster either); a relay lives until its Service goes or the agent stops.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from coxswain_devkit import kube as k
from coxswain_devkit.loadbalancer.relay import Address, Backends, TcpRelay

__all__ = ["Reference", "ServiceRelays", "references", "rewrite"]

log = logging.getLogger("coxswain_devkit.node")

Obj = k.Obj
SLICES = "endpointslices"
SERVICE_LABEL = "kubernetes.io/service-name"
RELAY_HOST = "127.0.0.1"
_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# A Service's DNS name with a port, not inside a longer name (`x.svc.example:1` is not one).
_NAME = re.compile(
    rf"(?<![\w.-])(?P<service>{_LABEL})\.(?P<namespace>{_LABEL})\.svc(?:\.cluster\.local)?"
    r":(?P<port>\d{1,5})(?![\w.-])"
)


@dataclass(frozen=True, slots=True)
class Reference:
    namespace: str  # the Service's namespace
    service: str  # the Service's name
    port: int  # the Service port dialled


def references(value: str) -> list[Reference]:
    """Every Service port a flag's value names (`host:port`, `https://host:port`, lists)."""
    return [Reference(m["namespace"], m["service"], int(m["port"])) for m in _NAME.finditer(value)]


def rewrite(value: str, relayed: dict[Reference, str]) -> str:
    """`value` with each relayed Service name and port replaced by its relay's address."""

    def one(match: re.Match[str]) -> str:
        ref = Reference(match["namespace"], match["service"], int(match["port"]))
        return relayed.get(ref, match[0])

    return _NAME.sub(one, value)


@dataclass
class _Relay:
    uid: str  # the Service's: one recreated under the same name is another
    relay: TcpRelay
    address: str  # "127.0.0.1:<port>"


def _service_port(service: Obj, number: int) -> Obj | None:
    for port in (service.get("spec") or {}).get("ports") or []:
        if int(port.get("port", 0)) == number and port.get("protocol", "TCP") == "TCP":
            return dict(port)
    return None


def endpoints(service: Obj, port: Obj, slices: Iterable[Obj]) -> list[Address]:
    """The ready endpoints of one Service port, or the serving terminating ones if none is."""
    name = service["metadata"]["name"]
    ready: list[Address] = []
    draining: list[Address] = []
    for piece in slices:
        if (piece["metadata"].get("labels") or {}).get(SERVICE_LABEL) != name:
            continue
        numbers = [
            int(p["port"])
            for p in piece.get("ports") or []
            if (p.get("name") or "") == (port.get("name") or "") and p.get("port") is not None
        ]
        for number in numbers[:1]:
            for endpoint in piece.get("endpoints") or []:
                conditions = endpoint.get("conditions") or {}
                where = [(str(a), number) for a in endpoint.get("addresses") or []]
                if conditions.get("ready") is not False:
                    ready += where
                elif conditions.get("serving"):
                    draining += where
    return sorted(set(ready or draining))


class ServiceRelays:
    def __init__(self, kube: k.Kube) -> None:
        self._kube = kube
        self._relays: dict[Reference, _Relay] = {}

    def __bool__(self) -> bool:
        return bool(self._relays)

    async def address(self, ref: Reference) -> str | None:
        """Where a pod reaches `ref` here ("127.0.0.1:<port>"); None if no Service has it."""
        held = self._relays.get(ref)
        if held is not None:
            return held.address
        service = await self._kube.get(k.path("services", ref.namespace, ref.service))
        port = _service_port(service, ref.port) if service is not None else None
        if service is None or port is None:
            return None
        relay = TcpRelay(Backends())
        bound = await relay.start(RELAY_HOST, 0)
        held = _Relay(service["metadata"]["uid"], relay, f"{RELAY_HOST}:{bound}")
        self._relays[ref] = held
        relay.backends.set(endpoints(service, port, await self._slices(ref.namespace)))
        log.info(
            "service relayed",
            extra={"fields": {"service": f"{ref.namespace}/{ref.service}:{ref.port}",
                              "relay": held.address}},
        )  # fmt: skip
        return held.address

    async def refresh(self, services: list[Obj], slices: list[Obj]) -> None:
        """Each relay's endpoints as the slices now say; a relay whose Service went is closed."""
        by_key = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
        for ref, held in list(self._relays.items()):
            service = by_key.get((ref.namespace, ref.service))
            port = _service_port(service, ref.port) if service is not None else None
            if service is None or port is None or service["metadata"]["uid"] != held.uid:
                await self._close(ref)
                continue
            same_namespace = (s for s in slices if s["metadata"].get("namespace") == ref.namespace)
            held.relay.backends.set(endpoints(service, port, same_namespace))

    async def close(self) -> None:
        for ref in list(self._relays):
            await self._close(ref)

    async def _close(self, ref: Reference) -> None:
        held = self._relays.pop(ref)
        await held.relay.close()
        log.info("service relay closed", extra={"fields": {"relay": held.address}})

    async def _slices(self, namespace: str) -> list[Obj]:
        where = k.path(SLICES, namespace, group="discovery.k8s.io")
        return await self._kube.items(where)
