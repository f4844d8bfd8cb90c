"""Endpoint choice within one `EndpointSet`: round robin over the endpoints taking new requests.

Where it sits: `tables.compile_tables` builds one `EndpointPicker` per `EndpointSet` resource
(key `endpoints/<ns>/<svc>/<port>`, the key `Backend.endpoints` names); the request cycle asks
it for an origin once per attempt (`http.dispatch` for the first, `http.request_cycle` for a
retry). A picker lives exactly as long as its snapshot. An `Origin` is what the pool
(`connector`) dials and keys its connections by.
"""

from __future__ import annotations

from typing import Any

from coxswain_proxy.dataplane.upstream.backend_tls import TlsClient
from coxswain_routing import Endpoint, EndpointSet


class H2c:
    """The marker of an origin spoken to in cleartext HTTP/2 (`appProtocol: kubernetes.io/h2c`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "h2c"


H2C = H2c()

# (address, port) as dialled, plus how to speak to it when plain HTTP/1.1 is not the answer:
# TLS when a BackendTLSPolicy governs it, or cleartext HTTP/2. The third element keeps the two
# kinds of connection to one address apart in the pool.
Origin = tuple[str, int] | tuple[str, int, TlsClient | H2c]


def takes_new_requests(endpoint: Endpoint) -> bool:
    # Terminating endpoints finish what they hold but get no new requests (issue 7, item 5);
    # a not-ready endpoint gets none either.
    return endpoint.ready and not endpoint.terminating


def tls_arguments(origin: Origin) -> dict[str, Any]:
    """The `create_connection` arguments that speak TLS to `origin`, if it wants TLS."""
    if len(origin) == 3 and isinstance(origin[2], TlsClient):
        client = origin[2]
        return {"ssl": client.context, "server_hostname": client.sni}
    return {}


def is_h2c(origin: Origin) -> bool:
    """Spoken to in HTTP/2: cleartext h2c, or TLS with ALPN h2 (`TlsClient.h2`)."""
    if len(origin) != 3:
        return False
    via = origin[2]
    return via is H2C or (isinstance(via, TlsClient) and via.h2)


class EndpointPicker:
    """Round robin over an endpoint set's ready endpoints; `None` when none is ready."""

    __slots__ = ("origins", "_next")

    def __init__(self, endpoint_set: EndpointSet, via: TlsClient | H2c | None = None) -> None:
        ready = [e for e in endpoint_set.endpoints if takes_new_requests(e)]
        self.origins: tuple[Origin, ...] = (
            tuple((e.address, e.port) for e in ready)
            if via is None
            else tuple((e.address, e.port, via) for e in ready)
        )
        self._next = 0

    def pick(self) -> Origin | None:
        origins = self.origins
        if not origins:
            return None
        index = self._next
        self._next = (index + 1) % len(origins)
        return origins[index]

    def others(self, tried: Origin) -> Origin | None:
        """The next origin after a failed one, for a retry; the same when it is the only one."""
        picked = self.pick()
        if picked == tried and len(self.origins) > 1:
            picked = self.pick()
        return picked
