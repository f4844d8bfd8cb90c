"""The Discovery gRPC service: checks a new stream, then feeds it snapshots as they change.

Where it sits: the controller's `serve` starts it on port 50051 with mandatory client
certificates (`credentials`); translation publishes into the `SnapshotRegistry`; the status
writer reads the `NodeRegistry`.

Every message a proxy sends is untrusted, whoever holds the certificate: `coxswain_proto.rpc`
refuses bytes that are not well formed, and `validate` checks each field of what remains,
both before the message reaches anything else; either failure ends that stream alone with
INVALID_ARGUMENT and fixed text naming the field. Each stream is checked in this order, and a
refusal ends it before any snapshot is sent: Subscribe first (and valid), the caller's SPIFFE
identity, leadership, wire version, scope authorisation, node_id ownership (docs/discovery.md
lists the status codes). Only then is anything registered, and everything registered is
released on the way out, whatever the way out. One task reads the proxy's messages into the
stream's event queue, while the handler waits on that queue — proxy messages, "published
content changed", "demoted", "closed" — and sends the next snapshot whenever the session
allows. A bug met while serving a stream ends that stream alone: INTERNAL with fixed text to
the proxy, the traceback in the log, `coxswain_discovery_stream_errors_total` counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import grpc.aio
from prometheus_client import Counter, Gauge

from coxswain_controller.discovery import validate
from coxswain_controller.discovery.admission import (
    MalformedScope,
    authorize,
    parse_identity,
    parse_scope,
)
from coxswain_controller.discovery.nodes import Nack, Node, NodeConflict, NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.discovery.session import StreamSession
from coxswain_controller.leader.leadership import Leadership
from coxswain_controller.translate.scopes import Identity, Scope
from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_service import tasks

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
INVALID = Counter(
    "coxswain_discovery_invalid_messages_total",
    "Proxy messages refused at the boundary (the stream ended INVALID_ARGUMENT), by field.",
    ["field"],
)
STREAM_ERRORS = Counter(
    "coxswain_discovery_stream_errors_total",
    "Discovery streams ended by a bug in the controller (the proxy saw INTERNAL).",
)

_CHANGED = "changed"
_DEMOTED = "demoted"
_EOF = "eof"


@dataclass(frozen=True, slots=True)
class _Close:
    """End the stream with this status (the node was superseded, a message was refused)."""

    code: grpc.StatusCode
    detail: str


_Event = pb.ProxyMessage | _Close | str


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
            async for message in self._stream(requests, context):
                yield message
        except grpc.aio.AbortError:
            raise
        except Exception:
            # A bug, whatever the proxy sent: this stream ends, every other one carries on.
            STREAM_ERRORS.inc()
            log.exception("discovery stream failed")
            await context.abort(grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL)

    async def _stream(
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
        try:
            scope = parse_scope(subscribe.scope)
        except MalformedScope as err:  # `validate` let it through: the message is ours
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
            async with asyncio.timeout(self._subscribe_timeout):  # cancel-safe, unlike wait_for
                first = await anext(requests)
        except (StopAsyncIteration, TimeoutError):
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, "expected Subscribe first") from None
        except rpc.MalformedMessage as err:
            detail = _refused(err.field, err.detail, None)
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, detail) from None
        invalid = validate.proxy_message(first)
        if invalid is not None:
            detail = _refused(invalid.field, invalid.detail, None)
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, detail)
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
        events: asyncio.Queue[_Event] = asyncio.Queue()

        def close(why: str) -> None:
            events.put_nowait(_Close(grpc.StatusCode.ABORTED, why))

        def on_leadership(leader: bool) -> None:
            if not leader:
                events.put_nowait(_DEMOTED)

        node = Node(subscribe.node_id, identity, scope, close=close)
        async with contextlib.AsyncExitStack() as held:
            # Each release is pushed before its registration, so that a registration failing
            # half way (a listener told of it raising) is undone too; releasing is idempotent.
            held.callback(self._nodes.unregister, node)
            try:
                self._nodes.register(node)
            except NodeConflict as err:
                REFUSED.labels(code="ALREADY_EXISTS").inc()
                await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(err))
            held.callback(self._registry.watch(scope, lambda: events.put_nowait(_CHANGED)))
            held.callback(self._leadership.subscribe(on_leadership))
            reader = tasks.spawn(
                _read(requests, events, node.node_id),
                name=f"discovery-read-{node.node_id}",
                may_end=True,
            )
            held.push_async_callback(_stop, reader)
            STREAMS.inc()
            held.callback(STREAMS.dec)
            held.callback(
                log.info, "discovery stream closed", extra={"fields": {"node": node.node_id}}
            )
            log.info(
                "discovery stream open",
                extra={
                    "fields": {"node": node.node_id, "identity": str(identity), "scope": str(scope)}
                },
            )
            async for message in self._loop(StreamSession(), events, node, context):
                yield message

    async def _loop(
        self,
        session: StreamSession,
        events: asyncio.Queue[_Event],
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
                if _handle(event, session, node):
                    self._nodes.changed()
            elif isinstance(event, _Close):  # superseded, or a message refused
                await context.abort(event.code, event.detail)
            elif event == _EOF:
                return
            elif event == _DEMOTED:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, NOT_THE_LEADER)


async def _read(
    requests: AsyncIterator[pb.ProxyMessage], events: asyncio.Queue[_Event], node_id: str
) -> None:
    """Queue each message once it has passed `validate`; the first that fails ends the stream."""
    try:
        async for message in requests:
            invalid = validate.proxy_message(message)
            if invalid is not None:
                detail = _refused(invalid.field, invalid.detail, node_id)
                events.put_nowait(_Close(grpc.StatusCode.INVALID_ARGUMENT, detail))
                return
            events.put_nowait(message)
    except rpc.MalformedMessage as err:
        detail = _refused(err.field, err.detail, node_id)
        events.put_nowait(_Close(grpc.StatusCode.INVALID_ARGUMENT, detail))
        return
    except Exception:
        STREAM_ERRORS.inc()
        log.exception("reading a discovery stream failed", extra={"fields": {"node": node_id}})
        events.put_nowait(_Close(grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL))
        return
    events.put_nowait(_EOF)


async def _stop(reader: asyncio.Task[None]) -> None:
    reader.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reader


def _refused(field: str, detail: str, node_id: str | None) -> str:
    """Count and log a refused message (its field, never its value); `detail` for the proxy."""
    INVALID.labels(field=field).inc()
    log.warning("proxy message refused", extra={"fields": {"node": node_id, "detail": detail}})
    return detail


def _handle(message: pb.ProxyMessage, session: StreamSession, node: Node) -> bool:
    """Apply one (validated) message; True when the node's acked version or binds changed."""
    if message.ack is not None:
        if not session.on_ack(message.ack):
            return False
        node.acked_version, node.acked_seq = session.acked_version, session.acked_seq
        return True
    if message.nack is not None:
        if session.on_nack(message.nack):
            node.last_nack = Nack(message.nack.version, message.nack.detail)
            NACKS.inc()
            log.warning(
                "proxy refused a snapshot",
                extra={
                    "fields": {
                        "node": node.node_id,
                        "version": validate.quote(message.nack.version),
                        "detail": validate.quote(message.nack.detail),
                    }
                },
            )
        return False
    if message.node_status is not None:
        bound = tuple(sorted((b.port, b.protocol.name) for b in message.node_status.bound))
        changed, node.bound = bound != node.bound, bound
        return changed
    log.warning("second Subscribe on a stream ignored", extra={"fields": {"node": node.node_id}})
    return False
