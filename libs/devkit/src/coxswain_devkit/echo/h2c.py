"""The echo backend's h2c port: cleartext HTTP/2 by prior knowledge, answering like `web`.

A Service port with `appProtocol: kubernetes.io/h2c` is spoken to this way (spec 003: "spoken
to in cleartext HTTP/2 by prior knowledge"), so tests of the proxy's h2c upstreams need a
backend that speaks it. Each stream gets the same JSON `web.describe` gives an HTTP/1.1 request,
with `protocol` "HTTP/2.0".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

import h2.config
import h2.connection
import h2.events

from coxswain_devkit.echo.web import Identity

__all__ = ["start"]


class _Connection(asyncio.Protocol):
    def __init__(self, identity: Identity) -> None:
        self._identity = identity
        self._h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self._transport: asyncio.Transport | None = None
        self._requests: dict[int, list[tuple[str, str]]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: a cast, not an isinstance.
        self._transport = cast(asyncio.Transport, transport)
        self._h2.initiate_connection()
        self._transport.write(self._h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._transport.write(self._h2.data_to_send())
            self._transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                # header_encoding="utf-8" makes h2 hand over str pairs.
                self._requests[event.stream_id] = [(str(n), str(v)) for n, v in event.headers or []]
            elif isinstance(event, h2.events.DataReceived):
                self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self._answer(event.stream_id)
        self._transport.write(self._h2.data_to_send())

    def _answer(self, stream_id: int) -> None:
        headers = self._requests.pop(stream_id, [])
        body = json.dumps(describe(headers, self._identity)).encode()
        response = [
            (":status", "200"),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ]
        self._h2.send_headers(stream_id, response)
        self._h2.send_data(stream_id, body, end_stream=True)


def describe(headers: list[tuple[str, str]], identity: Identity) -> dict[str, Any]:
    pseudo = {name: value for name, value in headers if name.startswith(":")}
    regular: dict[str, list[str]] = {}
    for name, value in headers:
        if not name.startswith(":"):
            regular.setdefault(name, []).append(value)
    target = pseudo.get(":path", "/")
    query: dict[str, list[str]] = {}
    for name, value in parse_qsl(urlsplit(target).query, keep_blank_values=True):
        query.setdefault(name, []).append(value)
    return {
        "path": target,
        "host": pseudo.get(":authority", ""),
        "method": pseudo.get(":method", ""),
        "proto": "HTTP/2.0",
        "protocol": "HTTP/2.0",
        "headers": regular,
        "query": query,
        "namespace": identity.namespace,
        "ingress": "",
        "service": identity.service,
        "pod": identity.pod,
    }


async def start(identity: Identity, host: str, port: int) -> tuple[asyncio.Server, int]:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(identity), host, port)
    return server, int(server.sockets[0].getsockname()[1])
