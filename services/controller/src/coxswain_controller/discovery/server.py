"""The Discovery gRPC service: checks a new stream, then feeds it snapshots as they change.

Where it sits: the controller's `serve` starts it on port 50051 with mandatory client
certificates (`credentials`); translation publishes into the `SnapshotRegistry`; the status
writer reads the `NodeRegistry`.

Each stream is checked in this order, and a refusal ends it before any snapshot is sent:
Subscribe first, the caller's SPIFFE identity, leadership, wire version, scope shape, scope
authorisation, node_id ownership (docs/discovery.md lists the status codes). Then one task
reads the proxy's messages into the stream's event queue, while the handler waits on that
queue — proxy messages, "published content changed", "demoted", "superseded" — and sends the
next snapshot whenever the session allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from prometheus_client import Counter, Gauge

from coxswain_controller.discovery.leadership import Leadership
from coxswain_controller.discovery.nodes import Node, NodeConflict, NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.discovery.scopes import (
    Identity,
    MalformedScope,
    Scope,
    authorize,
    parse_identity,
    parse_scope,
)
from coxswain_controller.discovery.session import StreamSession
from coxswain_proto import discovery as pb
from coxswain_proto import rpc

log = logging.getLogger(__name__)

__all__ = ["DiscoveryService", "NOT_THE_LEADER"]

NOT_THE_LEADER = "not the leader"

STREAMS = Gauge("coxswain_discovery_streams", "Live discovery streams.")
REFUSED = Counter(
    "coxswain_discovery_streams_refused_total", "Discovery streams refused, by status.", ["code"]
)
SNAPSHOTS = Counter(
    "coxswain_discovery_snapshots_sent_total", "Snapshots sent to proxies.", ["kind"]
)
NACKS = Counter("coxswain_discovery_nacks_total", "Snapshots proxies refused.")

_CHANGED = "changed"
_DEMOTED = "demoted"
_EOF = "eof"


class _Refusal(Exception):
    def __init__(self, code: grpc.StatusCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class DiscoveryService:
    """The Stream handler, bound to the registries it serves from."""

    def __init__(
        self,
        *,
        registry: SnapshotRegistry,
        nodes: NodeRegistry,
        leadership: Leadership,
        trust_domain: str,
        shared_proxy: Identity,
        subscribe_timeout: float = 10.0,
    ) -> None:
        self._registry = registry
        self._nodes = nodes
        self._leadership = leadership
        self._trust_domain = trust_domain
        self._shared_proxy = shared_proxy
        self._subscribe_timeout = subscribe_timeout

    def add_to(self, server: grpc.aio.Server) -> None:
        rpc.add_discovery_handler(server, self.stream)

    async def stream(
        self, requests: AsyncIterator[pb.ProxyMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ControllerMessage]:
        try:
            identity, subscribe, scope = await self._admit(requests, context)
        except _Refusal as refusal:
            REFUSED.labels(code=refusal.code.name).inc()
            log.warning(
                "discovery stream refused",
                extra={"fields": {"code": refusal.code.name, "detail": refusal.detail}},
            )
            await context.abort(refusal.code, refusal.detail)
            return
        async for message in self._serve(requests, context, identity, subscribe, scope):
            yield message

    async def _admit(
        self, requests: AsyncIterator[pb.ProxyMessage], context: grpc.aio.ServicerContext
    ) -> tuple[Identity, pb.Subscribe, Scope]:
        # The Subscribe is read before any refusal: a refusal racing the client's first write
        # reaches a grpc.aio client as an error on that write (or as INTERNAL) instead of the
        # status that explains it. The TLS handshake has already checked the certificate chain.
        subscribe = await self._first_subscribe(requests)
        identity = self._peer_identity(context)
        # Spec 001: "a standby replica that gets dialled anyway ... rejects the stream with
        # FAILED_PRECONDITION".
        if not self._leadership.is_leader:
            raise _Refusal(grpc.StatusCode.FAILED_PRECONDITION, NOT_THE_LEADER)
        if subscribe.wire_version != rpc.WIRE_VERSION:
            raise _Refusal(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"wire version mismatch: the proxy speaks {subscribe.wire_version}, "
                f"this controller speaks {rpc.WIRE_VERSION}",
            )
        if not subscribe.node_id:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, "Subscribe needs a node_id")
        try:
            scope = parse_scope(subscribe.scope)
        except MalformedScope as err:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, str(err)) from err
        denied = authorize(
            identity,
            scope,
            shared_proxy=self._shared_proxy,
            expected_gateway_identity=self._registry.expected_identity,
        )
        if denied is not None:
            raise _Refusal(grpc.StatusCode.PERMISSION_DENIED, denied)
        return identity, subscribe, scope

    def _peer_identity(self, context: grpc.aio.ServicerContext) -> Identity:
        auth: dict[str, list[bytes]] = context.auth_context()
        for raw in auth.get("peer_spiffe_id", []):
            identity = parse_identity(raw.decode(errors="replace"), self._trust_domain)
            if identity is not None:
                return identity
        raise _Refusal(
            grpc.StatusCode.UNAUTHENTICATED,
            f"the client certificate carries no SPIFFE ID in trust domain {self._trust_domain}",
        )

    async def _first_subscribe(self, requests: AsyncIterator[pb.ProxyMessage]) -> pb.Subscribe:
        try:
            first = await asyncio.wait_for(anext(requests), self._subscribe_timeout)
        except (StopAsyncIteration, TimeoutError):
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, "expected Subscribe first") from None
        if first.subscribe is None:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be Subscribe")
        return first.subscribe

    async def _serve(
        self,
        requests: AsyncIterator[pb.ProxyMessage],
        context: grpc.aio.ServicerContext,
        identity: Identity,
        subscribe: pb.Subscribe,
        scope: Scope,
    ) -> AsyncIterator[pb.ControllerMessage]:
        events: asyncio.Queue[Any] = asyncio.Queue()
        node = Node(subscribe.node_id, identity, scope, close=events.put_nowait)
        try:
            self._nodes.register(node)
        except NodeConflict as err:
            REFUSED.labels(code="ALREADY_EXISTS").inc()
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(err))
            return
        unwatch = self._registry.watch(scope, lambda: events.put_nowait(_CHANGED))

        def on_leadership(leader: bool) -> None:
            if not leader:
                events.put_nowait(_DEMOTED)

        unlead = self._leadership.subscribe(on_leadership)
        reader = asyncio.create_task(_read(requests, events), name=f"discovery-read-{node.node_id}")
        session = StreamSession()
        STREAMS.inc()
        log.info(
            "discovery stream open",
            extra={
                "fields": {"node": node.node_id, "identity": str(identity), "scope": str(scope)}
            },
        )
        try:
            async for message in self._loop(session, events, node, context):
                yield message
        finally:
            STREAMS.dec()
            unwatch()
            unlead()
            self._nodes.unregister(node)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            log.info("discovery stream closed", extra={"fields": {"node": node.node_id}})

    async def _loop(
        self,
        session: StreamSession,
        events: asyncio.Queue[Any],
        node: Node,
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[pb.ControllerMessage]:
        while True:
            snapshot = session.next_snapshot(self._registry.current(node.scope))
            if snapshot is not None:
                SNAPSHOTS.labels(kind="full" if snapshot.full else "delta").inc()
                yield pb.ControllerMessage(snapshot=snapshot)
            event = await events.get()
            if isinstance(event, pb.ProxyMessage):
                _handle(event, session, node)
                self._nodes.changed()
            elif event == _EOF:
                return
            elif event == _DEMOTED:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, NOT_THE_LEADER)
            elif event != _CHANGED:  # the node closed this stream, saying why
                await context.abort(grpc.StatusCode.ABORTED, event)


async def _read(requests: AsyncIterator[pb.ProxyMessage], events: asyncio.Queue[Any]) -> None:
    try:
        async for message in requests:
            events.put_nowait(message)
    finally:
        events.put_nowait(_EOF)


def _handle(message: pb.ProxyMessage, session: StreamSession, node: Node) -> None:
    if message.ack is not None and session.on_ack(message.ack):
        node.acked_version, node.acked_seq = session.acked_version, session.acked_seq
    elif message.nack is not None and session.on_nack(message.nack):
        NACKS.inc()
        log.warning(
            "proxy refused a snapshot",
            extra={
                "fields": {
                    "node": node.node_id,
                    "version": message.nack.version,
                    "detail": message.nack.detail,
                }
            },
        )
    elif message.node_status is not None:
        node.bound = tuple(sorted((b.port, b.protocol.name) for b in message.node_status.bound))
    elif message.subscribe is not None:
        log.warning(
            "second Subscribe on a stream ignored", extra={"fields": {"node": node.node_id}}
        )
