"""The echo backend's HTTP/2 ports: cleartext by prior knowledge (or TLS with ALPN h2).

A Service port with `appProtocol: kubernetes.io/h2c` is spoken to this way (spec 003: "spoken
to in cleartext HTTP/2 by prior knowledge"), and so is a gRPC one, so one server serves both:
a stream whose content-type is `application/grpc*` is a gRPC call, answered by `grpc_echo`
(the conformance `GrpcEcho` service); any other gets the same JSON `web.describe` gives an
HTTP/1.1 request, with `protocol` "HTTP/2.0". Each stream is answered once it has ended, its
reply sent within the client's flow-control windows.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from coxswain_devkit.echo import grpc_echo
from coxswain_devkit.echo import grpc_messages as pb
from coxswain_devkit.echo.grpc_echo import Reply
from coxswain_devkit.echo.web import Identity

__all__ = ["H2Server", "describe", "start"]

_CONFIG = h2.config.H2Configuration(client_side=False, header_encoding=None)
SNI = "_coxswain_echo_sni"  # where the TLS server name is noted on each connection's SSLObject


@dataclass
class _Stream:
    headers: list[tuple[bytes, bytes]]
    body: bytearray = field(default_factory=bytearray)
    pending: bytearray = field(default_factory=bytearray)  # reply DATA awaiting window
    trailers: list[tuple[bytes, bytes]] | None = None  # sent once `pending` is out


class _Connection(asyncio.Protocol):
    def __init__(self, identity: Identity, open_now: set[asyncio.Transport]) -> None:
        self._identity = identity
        self._open = open_now
        self._h2 = h2.connection.H2Connection(_CONFIG)
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, _Stream] = {}
        self._tls: pb.TLSAssertions | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: a cast, not an isinstance.
        self._transport = cast(asyncio.Transport, transport)
        self._open.add(self._transport)
        self._tls = _tls_assertions(transport.get_extra_info("ssl_object"))
        self._h2.initiate_connection()
        self._transport.write(self._h2.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._open.discard(self._transport)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        try:
            events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self._transport.write(self._h2.data_to_send())
            self._transport.close()
            return
        for event in events:
            self._event(event)
        self._transport.write(self._h2.data_to_send())

    def _event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._streams[event.stream_id] = _Stream(list(event.headers or []))
        elif isinstance(event, h2.events.DataReceived):
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            stream = self._streams.get(event.stream_id)
            if stream is not None and len(stream.body) <= grpc_echo.MAX_REQUEST:
                stream.body += event.data
        elif isinstance(event, h2.events.StreamEnded):
            self._answer(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            self._streams.pop(event.stream_id, None)
        elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            for stream_id in list(self._streams):
                self._send(stream_id)

    def _answer(self, stream_id: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        if grpc_echo.is_grpc(stream.headers):
            if len(stream.body) > grpc_echo.MAX_REQUEST:
                reply = grpc_echo.too_large()
            else:
                reply = grpc_echo.answer(stream.headers, bytes(stream.body), self._identity,
                                         self._tls)  # fmt: skip
        else:
            reply = _json_reply(stream.headers, self._identity)
        if reply.trailers is None and not reply.data:
            self._h2.send_headers(stream_id, reply.headers, end_stream=True)
            del self._streams[stream_id]
            return
        self._h2.send_headers(stream_id, reply.headers)
        stream.pending += reply.data
        stream.trailers = reply.trailers or []
        self._send(stream_id)

    def _send(self, stream_id: int) -> None:
        stream = self._streams[stream_id]
        if stream.trailers is None:
            return  # still being received
        conn = self._h2
        while stream.pending:
            size = min(len(stream.pending), conn.local_flow_control_window(stream_id),
                       conn.max_outbound_frame_size)  # fmt: skip
            if size <= 0:
                return
            conn.send_data(stream_id, bytes(stream.pending[:size]))
            del stream.pending[:size]
        if stream.trailers:
            conn.send_headers(stream_id, stream.trailers, end_stream=True)
        else:
            conn.end_stream(stream_id)
        del self._streams[stream_id]


def _json_reply(headers: list[tuple[bytes, bytes]], identity: Identity) -> Reply:
    text = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
    body = json.dumps(describe(text, identity)).encode()
    head = [(b":status", b"200"), (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body))]  # fmt: skip
    return Reply(head, body, [])


def _tls_assertions(sslobj: object) -> pb.TLSAssertions | None:
    if not isinstance(sslobj, ssl.SSLObject):
        return None
    cipher = sslobj.cipher()
    peer = sslobj.getpeercert(binary_form=True)
    return pb.TLSAssertions(
        version=sslobj.version() or "",
        negotiated_protocol=sslobj.selected_alpn_protocol() or "",
        server_name=getattr(sslobj, SNI, None) or "",
        cipher_suite=cipher[0] if cipher else "",
        peer_certificates=(ssl.DER_cert_to_PEM_cert(peer),) if peer else (),
    )


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


def _server_context(context: ssl.SSLContext) -> ssl.SSLContext:
    """`context`, offering h2 by ALPN and noting each client's server name (for the gRPC
    echo's TLS assertions); a server-name callback already set still runs."""
    context.set_alpn_protocols(["h2"])
    before = context.sni_callback

    def note(sslobj: ssl.SSLObject, name: str, ctx: ssl.SSLContext) -> int | None:
        setattr(sslobj, SNI, name)
        return before(sslobj, name, ctx) if before is not None else None

    context.sni_callback = note
    return context


class H2Server:
    """A listening server and its open connections, all closed by `close`."""

    def __init__(self, server: asyncio.Server, open_now: set[asyncio.Transport]) -> None:
        self.server = server
        self.open = open_now

    async def close(self) -> None:
        self.server.close()
        for transport in list(self.open):
            transport.abort()  # a test backend: no TLS close_notify to wait for
        await self.server.wait_closed()
        await asyncio.sleep(0)  # the aborted connections' connection_lost run now


async def start(
    identity: Identity, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[H2Server, int]:
    """A started server on (`host`, `port`) and the port it bound: h2c, or over TLS (ALPN h2)."""
    loop = asyncio.get_running_loop()
    context = _server_context(ssl_context) if ssl_context is not None else None
    open_now: set[asyncio.Transport] = set()
    server = await loop.create_server(
        lambda: _Connection(identity, open_now), host, port, ssl=context
    )
    return H2Server(server, open_now), int(server.sockets[0].getsockname()[1])
