"""IP allow and deny lists: the client's address against a rule's CIDRs.

Where it sits: `gate.admit` asks `SourceCheck.allows` first of all, with the connection's
peer address as the client connection wrote it into its X-Forwarded-For tail
(`heads.forwarded_tail`, made once per connection): the real client address, never a header
the client sent. Answers are remembered per address (bounded), so a client's second request
costs one dict lookup and parsing an address happens once per client, not per request.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from coxswain_routing import SourceRanges, parse_cidr

__all__ = ["CidrSet", "SourceCheck", "client_address"]

# Addresses remembered per check; past it the memory starts again (a crude, O(1) bound).
MEMO_ENTRIES = 8192
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(forwarded: bytes) -> bytes:
    """The peer address a connection's `forwarded` tail starts with."""
    end = forwarded.find(b"\r\n")
    return forwarded if end < 0 else forwarded[:end]


class CidrSet:
    """Membership of an address in a set of networks (IPv4-mapped IPv6 read as IPv4)."""

    __slots__ = ("networks",)

    def __init__(self, cidrs: Iterable[str]) -> None:
        self.networks: tuple[Network, ...] = tuple(parse_cidr(c) for c in cidrs)

    def __contains__(self, address: bytes) -> bool:
        try:
            ip = ipaddress.ip_address(address.decode("ascii"))
        except ValueError:
            return False  # not an IP peer (a Unix socket): in no network
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == n.version and ip in n for n in self.networks)


class SourceCheck:
    """Whether a client address is served: not denied, and allowed when an allow list is set
    (ingress-nginx's denylist wins over its allowlist, as nginx's `deny` before `allow`)."""

    __slots__ = ("deny", "allow", "memo")

    def __init__(self, ranges: SourceRanges) -> None:
        self.deny = CidrSet(ranges.deny)
        self.allow = CidrSet(ranges.allow) if ranges.allow else None
        self.memo: dict[bytes, bool] = {}

    def allows(self, address: bytes) -> bool:
        verdict = self.memo.get(address)
        if verdict is None:
            verdict = address not in self.deny and (self.allow is None or address in self.allow)
            if len(self.memo) >= MEMO_ENTRIES:
                self.memo.clear()
            self.memo[address] = verdict
        return verdict
