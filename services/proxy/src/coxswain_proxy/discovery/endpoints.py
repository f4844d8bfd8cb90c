"""The `--discovery-endpoint` / `--discovery-bootstrap-endpoint` values and how they are dialled.

Both flags take comma-separated `host:port` or `https://host:port`. `http://` is refused: the
discovery channel is TLS or nothing (docs/discovery.md, "The channel"). Dialling rotates through
the list, one endpoint per attempt, so a dead or standby replica costs one attempt, not all.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from coxswain_proto import rpc
from coxswain_proxy.discovery import failures


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str  # a DNS name or an IP address (IPv6 without brackets)
    port: int

    @property
    def target(self) -> str:
        """The gRPC target string."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.target


def parse(text: str) -> tuple[Endpoint, ...]:
    """Every endpoint of a comma-separated list; `ConfigError` naming the first bad one."""
    parsed = tuple(_one(item.strip()) for item in text.split(",") if item.strip())
    if not parsed:
        raise failures.ConfigError("no endpoint given")
    return parsed


def _one(item: str) -> Endpoint:
    scheme, sep, _ = item.partition("://")
    if sep and scheme != "https":
        raise failures.ConfigError(f"endpoint {item!r}: only https:// (TLS) is allowed")
    url = urllib.parse.urlsplit(item if sep else f"https://{item}")
    try:
        port = url.port
    except ValueError as exc:
        raise failures.ConfigError(f"endpoint {item!r}: {exc}") from exc
    if not url.hostname or port is None or url.path not in ("", "/"):
        raise failures.ConfigError(f"endpoint {item!r}: expected host:port")
    return Endpoint(url.hostname, port)


class Rotation:
    """Cycles through endpoints: stay on `current` while it works, `advance()` after a failure."""

    def __init__(self, endpoints: tuple[Endpoint, ...]) -> None:
        self._endpoints = endpoints
        self._index = 0

    def __len__(self) -> int:
        return len(self._endpoints)

    @property
    def current(self) -> Endpoint:
        return self._endpoints[self._index]

    def advance(self) -> None:
        self._index = (self._index + 1) % len(self._endpoints)


def channel_options(server_name: str | None) -> list[tuple[str, Any]]:
    """Options for a channel to the controller or the identity service: a full snapshot may be
    as large as the controller will send, and the peer's certificate is verified against
    `server_name`, if given."""
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", rpc.MAX_SNAPSHOT_BYTES)]
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return options
