"""Loopback addresses handed out one at a time: a pod IP each (127.0.201.0/24), or a load balancer
address per Service (127.0.200.0/24).

On one machine every pod would otherwise share 127.0.0.1, and two replicas of one Deployment
could not both bind their containerPort; Linux routes all of 127.0.0.0/8 to the loopback
interface, so each pod and each LoadBalancer Service gets an address of its own instead.

Two agents (two test runs side by side, say) must not hand out the same address, so taking one
is claimed across processes: the pool binds a TCP socket, never listened on, to port
`CLAIM_PORT` of it. A second bind of that address and port fails in any other process until the
socket is closed, which also happens when the holder dies. The port is outside Linux's ephemeral
range, so no connection the OS opens collides with it.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["AddressPool", "PoolExhausted", "CLAIM_PORT", "POD_NETWORK", "LB_NETWORK"]

POD_NETWORK = "127.0.201.0/24"
LB_NETWORK = "127.0.200.0/24"
CLAIM_PORT = 65535


class PoolExhausted(Exception):
    """Every address in the pool is taken (here or by another process)."""


class AddressPool:
    def __init__(self, network: str) -> None:
        self.network = ipaddress.ip_network(network)
        self._claims: dict[str, socket.socket] = {}

    def allocate(self, preferred: str = "") -> str:
        """`preferred` if it can be had, else the lowest free host address of the pool."""
        if preferred and self.claim(preferred):
            return preferred
        for host in self.network.hosts():
            if self.claim(str(host)):
                return str(host)
        raise PoolExhausted(f"no free address left in {self.network}")

    def claim(self, address: str) -> bool:
        """Take `address`; False if it is already taken, by this pool or another process."""
        if address in self._claims:
            return False
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((address, CLAIM_PORT))
        except OSError:
            sock.close()
            return False
        self._claims[address] = sock
        return True

    def release(self, address: str) -> None:
        sock = self._claims.pop(address, None)
        if sock is not None:
            sock.close()

    def release_all(self) -> None:
        for address in list(self._claims):
            self.release(address)

    def held(self) -> frozenset[str]:
        return frozenset(self._claims)
