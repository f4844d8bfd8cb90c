"""A forged proxy's bytes over real gRPC and real mTLS: each refused alone, nothing else harmed.

The client holds a valid SVID and sends hand-made protobuf bytes: every field of ProxyMessage,
Subscribe, Scope (and its Gateway), Ack, Nack, NodeStatus (and its BoundPort) with each wrong
wire type, values over each limit or outside each character set, and garbage. Each stream must
end INVALID_ARGUMENT with fixed text naming the field, and the server must be unharmed: a
well-formed proxy is served next, the node registry holds nothing of the forgeries, and (with
the real publisher and status writer against the API emulator) a Gateway still reaches
Programmed once its proxy acks and binds; and the production listener refuses a message over
its size bound before reading it. Leaves out the well-formed refusals and snapshot flow
(server_test.py) and bugs inside the controller (isolation_test.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any, cast

import grpc
import grpc.aio
import kubernetes
import pytest
from prometheus_client import REGISTRY

from coxswain_controller.conftest import SHARED, TRUST_DOMAIN, Controller, subscribe
from coxswain_controller.discovery import listener, validate
from coxswain_controller.discovery.credentials import CertificateAuthority as CA
from coxswain_controller.discovery.nodes import NodeRegistry
from coxswain_controller.discovery.registry import SnapshotRegistry
from coxswain_controller.leader.leadership import Leadership
from coxswain_controller.publish import Publisher
from coxswain_controller.status.writer import StatusWriter
from coxswain_controller.translate import Inputs, Options
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.protowire import (
    LEN,
    VARINT,
    WIRE_NAMES,
    WRONG,
    f_len,
    f_str,
    f_varint,
    tag,
    varint,
)
from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_routing import Endpoint, EndpointSet

WAIT = 60.0  # a safety net for a hung stream, not a bound on speed: CI machines are loaded
# ------------------------------------------------------------------ well-formed pieces

NODE, WIRE_VERSION = f_str(1, "forged"), f_varint(2, rpc.WIRE_VERSION)


def sub(body: bytes) -> bytes:
    """A ProxyMessage holding a Subscribe with this body."""
    return f_len(1, body)


def sub_scope(scope: bytes) -> bytes:
    return sub(NODE + WIRE_VERSION + f_len(3, scope))


def gateway(namespace: bytes = f_str(1, "shop"), name: bytes = f_str(2, "gw")) -> bytes:
    return sub_scope(f_len(2, namespace + name))


def ack(body: bytes) -> bytes:
    return f_len(2, body)


def nack(body: bytes) -> bytes:
    return f_len(3, body)


def bound(*ports: bytes) -> bytes:
    return f_len(4, b"".join(f_len(1, port) for port in ports))


def port(number: int = 8080, protocol: int = 1) -> bytes:
    return f_varint(1, number) + f_varint(2, protocol)


# (field path, its wire type, first message or after a Subscribe, the field's bytes -> message)
FIELDS: list[tuple[str, int, bool, Callable[[Callable[[int], bytes]], bytes]]] = [
    ("subscribe", LEN, True, lambda f: f(1)),
    ("ack", LEN, False, lambda f: f(2)),
    ("nack", LEN, False, lambda f: f(3)),
    ("node_status", LEN, False, lambda f: f(4)),
    ("subscribe.node_id", LEN, True, lambda f: sub(f(1) + WIRE_VERSION)),
    ("subscribe.wire_version", VARINT, True, lambda f: sub(NODE + f(2))),
    ("subscribe.scope", LEN, True, lambda f: sub(NODE + WIRE_VERSION + f(3))),
    ("subscribe.scope.shared_pool", LEN, True, lambda f: sub_scope(f(1))),
    ("subscribe.scope.gateway", LEN, True, lambda f: sub_scope(f(2))),
    ("subscribe.scope.gateway.namespace", LEN, True, lambda f: gateway(namespace=f(1))),
    ("subscribe.scope.gateway.name", LEN, True, lambda f: gateway(name=f(2))),
    ("ack.version", LEN, False, lambda f: ack(f(1) + f_str(2, "n"))),
    ("ack.nonce", LEN, False, lambda f: ack(f_str(1, "v") + f(2))),
    ("nack.version", LEN, False, lambda f: nack(f(1) + f_str(2, "n"))),
    ("nack.nonce", LEN, False, lambda f: nack(f_str(1, "v") + f(2))),
    ("nack.detail", LEN, False, lambda f: nack(f_str(2, "n") + f(3))),
    ("node_status.bound", LEN, False, lambda f: f_len(4, f(1))),
    ("node_status.bound.port", VARINT, False, lambda f: bound(f(1) + f_varint(2, 1))),
    ("node_status.bound.protocol", VARINT, False, lambda f: bound(f_varint(1, 80) + f(2))),
]

WRONG_WIRE_TYPES = [
    pytest.param(first, build(WRONG[wire]), f"{path}: invalid", id=f"{path}-as-{WIRE_NAMES[wire]}")
    for path, expected, first, build in FIELDS
    for wire in WRONG
    if wire != expected
]


def first(id_: str, message: bytes, detail: str) -> Any:
    """A case sent as the stream's first message."""
    return pytest.param(True, message, detail, id=id_)


def later(id_: str, message: bytes, detail: str) -> Any:
    """A case sent once a valid Subscribe has been served."""
    return pytest.param(False, message, detail, id=id_)


def node_id(value: str | bytes) -> bytes:
    return sub(f_len(1, value.encode() if isinstance(value, str) else value) + WIRE_VERSION)


def namespace(value: str) -> bytes:
    return gateway(namespace=f_str(1, value) if value else b"")


def name(value: str) -> bytes:
    return gateway(name=f_str(2, value) if value else b"")


def ack_of(version: str, nonce: str) -> bytes:
    return ack((f_str(1, version) if version else b"") + (f_str(2, nonce) if nonce else b""))


def nack_of(nonce: str, *, version: str = "", detail: str = "") -> bytes:
    fields = (1, version), (2, nonce), (3, detail)
    return nack(b"".join(f_str(n, value) for n, value in fields if value))


EVERY_PORT = [port(p % 65535 + 1, 4 + p // 65535) for p in range(validate.BOUND_MAX + 1)]
NODE_ID, NS, NAME = (
    "subscribe.node_id",
    "subscribe.scope.gateway.namespace",
    "subscribe.scope.gateway.name",
)
PORT, PROTOCOL = "node_status.bound.port", "node_status.bound.protocol"

BAD_VALUES = [
    first("node-id-3MiB", node_id("x" * (3 << 20)), f"{NODE_ID}: too long"),
    first("node-id-254", node_id("x" * 254), f"{NODE_ID}: too long"),
    first("node-id-missing", node_id(""), f"{NODE_ID}: missing"),
    first("node-id-space", node_id("a b"), f"{NODE_ID}: bad characters"),
    first("node-id-newline", node_id("p\nforged log line"), f"{NODE_ID}: bad characters"),
    first("node-id-non-ascii", node_id("прокси"), f"{NODE_ID}: bad characters"),
    first("node-id-not-utf8", node_id(b"\xff\xfe"), f"{NODE_ID}: invalid"),
    first(
        "wire-version-11-byte-varint",
        sub(NODE + tag(2, VARINT) + b"\xff" * 10 + b"\x01"),
        "subscribe.wire_version: invalid",
    ),
    first("scope-empty", sub_scope(b""), "subscribe.scope: no kind"),
    first(
        "scope-two-kinds",
        sub_scope(f_len(1, b"") + f_len(2, b"")),
        "subscribe.scope.gateway: invalid",
    ),
    first("namespace-64", namespace("a" * 64), f"{NS}: too long"),
    first("namespace-upper-case", namespace("Shop"), f"{NS}: bad characters"),
    first("namespace-not-a-label", namespace("a.b"), f"{NS}: bad characters"),
    first("namespace-missing", namespace(""), f"{NS}: missing"),
    first("name-254", name("a" * 254), f"{NAME}: too long"),
    first("name-leading-dash", name("-gw"), f"{NAME}: bad characters"),
    first("name-missing", name(""), f"{NAME}: missing"),
    first("envelope-empty", b"", "proxy_message: no kind"),
    first("envelope-two-kinds", sub(NODE + WIRE_VERSION) + f_len(2, b""), "ack: invalid"),
    later("ack-version-129", ack_of("v" * 129, "n"), "ack.version: too long"),
    later("ack-version-missing", ack_of("", "n"), "ack.version: missing"),
    later("ack-version-space", ack_of("v v", "n"), "ack.version: bad characters"),
    later("ack-nonce-missing", ack_of("v", ""), "ack.nonce: missing"),
    later("ack-nonce-65", ack_of("v", "n" * 65), "ack.nonce: too long"),
    later("nack-nonce-missing", nack_of("", version="v"), "nack.nonce: missing"),
    later("nack-version-129", nack_of("n", version="v" * 129), "nack.version: too long"),
    later("nack-detail-16KiB", nack_of("n", detail="d" * (16 * 1024 + 1)), "nack.detail: too long"),
    later("port-0", bound(port(0)), f"{PORT}: out of range"),
    later("port-70000", bound(port(70000)), f"{PORT}: out of range"),
    later("protocol-unspecified", bound(port(protocol=0)), f"{PROTOCOL}: out of range"),
    later("protocol-99", bound(port(protocol=99)), f"{PROTOCOL}: out of range"),
    later("bound-twice", bound(port(), port()), "node_status.bound: duplicate"),
    later("bound-over-max", bound(*EVERY_PORT), "node_status.bound: too long"),
]

GARBAGE = [
    first("garbage", b"\xff\xff\xff\xff not a protobuf", "ProxyMessage: invalid"),
    first("truncated", tag(1, LEN) + varint(16) + b"abc", "subscribe: invalid"),
    first("group-wire-type", tag(1, 3) + tag(1, 4), "subscribe: invalid"),
    first("wire-type-7-unknown-field", tag(9, 7), "ProxyMessage: invalid"),
    first("unknown-field-truncated", tag(9, LEN) + varint(5) + b"ab", "ProxyMessage: invalid"),
    first("field-number-0", b"\x00\x01", "ProxyMessage: invalid"),
    first("tag-11-byte-varint", b"\x80" * 11, "ProxyMessage: invalid"),
    later("garbage-in-bound-port", bound(b"\xff\xff\xff"), "node_status.bound: invalid"),
    later("truncated-in-ack", f_len(2, b"\x0a\x7f"), "ack.version: invalid"),
]

CASES = [*WRONG_WIRE_TYPES, *BAD_VALUES, *GARBAGE]


# ------------------------------------------------------------------ driving a forged stream


def endpoints(address: str = "10.0.0.1") -> EndpointSet:
    return EndpointSet("shop", "web", 80, (Endpoint(address, 8080),))


def raw_stream(channel: grpc.aio.Channel) -> Any:
    """A Stream call whose requests are sent as the bytes given."""
    return channel.stream_stream(
        rpc.DISCOVERY_STREAM,
        request_serializer=None,
        response_deserializer=pb.ControllerMessage.parse,
    )()


async def forge(controller: Controller, first: bool, message: bytes, node: str) -> Any:
    """Send `message` (first, or after a Subscribe as `node` was served); the call's error."""
    call = raw_stream(controller.channel(controller.svid()))
    if not first:
        await call.write(bytes(subscribe(node)))
        reply = await asyncio.wait_for(call.read(), WAIT)
        assert reply is not grpc.aio.EOF and reply.snapshot is not None
    await call.write(message)
    # Nothing more is sent before the refusal: the one snapshot sent is still in flight.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call.read(), WAIT)
    return caught.value


async def wait_until(predicate: Callable[[], object]) -> None:
    """Poll state the server owns (it offers no event to wait on), within a generous bound."""
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def stream_errors() -> float:
    return REGISTRY.get_sample_value("coxswain_discovery_stream_errors_total") or 0.0


@pytest.mark.parametrize(("first", "message", "detail"), CASES)
async def test_each_forgery_is_invalid_argument_naming_the_field_and_harms_nothing(
    controller: Controller, first: bool, message: bytes, detail: str
) -> None:
    controller.registry.publish({SHARED_POOL: [endpoints()]})
    errors_before = stream_errors()
    err = await forge(controller, first, message, "forger")
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, detail)
    await wait_until(lambda: controller.nodes.all() == [])

    call = controller.open()
    await call.write(subscribe("honest"))
    reply = await asyncio.wait_for(call.read(), WAIT)
    assert reply.snapshot.full
    assert [n.node_id for n in controller.nodes.all()] == ["honest"]
    assert stream_errors() == errors_before


async def test_the_listener_refuses_a_message_over_its_bound_before_reading_it() -> None:
    ca = CertificateAuthority.create()
    settings = listener.DiscoverySettings(
        "127.0.0.1", 0, CA(ca.certificate_pem, ca.key_pem), ("localhost",), TRUST_DOMAIN, SHARED
    )
    state = SnapshotRegistry(), NodeRegistry(), Leadership(leader=True)
    server, port = await listener.start(
        settings, registry=state[0], nodes=state[1], leadership=state[2]
    )
    running = Controller(ca, port, *state)
    try:
        call = raw_stream(running.channel(running.svid()))
        await call.write(sub(f_str(1, "x" * listener.MAX_PROXY_MESSAGE_BYTES) + WIRE_VERSION))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await asyncio.wait_for(call.read(), WAIT)
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert state[1].all() == []
    finally:
        for channel in running.channels:
            await channel.close()
        await server.stop(None)


# ------------------------------------------------------------------ Programmed, after it all

GROUP, VERSION = "gateway.networking.k8s.io", "v1"
MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
]


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


def _inputs(client: Any) -> Inputs:
    custom = kubernetes.client.CustomObjectsApi(client)
    objects: list[Any] = []
    for kind, plural in (("GatewayClass", "gatewayclasses"), ("Gateway", "gateways")):
        listed: Any = custom.list_cluster_custom_object(GROUP, VERSION, plural)
        objects += [{**item, "kind": kind} for item in listed["items"]]
    namespaces = kubernetes.client.CoreV1Api(client).list_namespace().items
    objects += [{**client.sanitize_for_serialization(n), "kind": "Namespace"} for n in namespaces]
    return Inputs.from_objects(objects)


def _programmed(client: Any) -> dict[str, Any]:
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    gateway = custom.get_namespaced_custom_object(GROUP, VERSION, "shop", "gateways", "gw")
    conditions = (gateway.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Programmed"), {})


async def _until(client: Any, status: str, words: str = "") -> dict[str, Any]:
    """Poll the API server (it offers this test no event to wait on), within a generous bound."""
    async with asyncio.timeout(WAIT):
        while True:
            condition = await asyncio.to_thread(_programmed, client)
            if condition.get("status") == status and words in condition.get("message", ""):
                return condition
            await asyncio.sleep(0.05)


async def test_after_every_forgery_a_gateway_still_becomes_programmed(
    controller: Controller, client: Any
) -> None:
    async def leader() -> bool:
        return controller.leadership.is_leader

    writer = StatusWriter(
        client, controller_name=Options().gateway_controller, confirm_leader=leader
    )
    inputs = await asyncio.to_thread(_inputs, client)
    publisher = Publisher(
        inputs=lambda: inputs,
        registry=controller.registry,
        nodes=controller.nodes,
        leadership=controller.leadership,
        options=Options(),
        writer=writer,
    )
    task = asyncio.create_task(writer.run())
    try:
        await publisher.rebuild()
        await _until(client, "False", "waiting for a proxy serving SharedPool to connect")
        # Every forgery reaches a gate with a published Gateway waiting on its proxies.
        for index, case in enumerate(CASES):
            first, message, detail = case.values
            err = await forge(controller, bool(first), cast(bytes, message), f"forger-{index}")
            assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, detail)
        await wait_until(lambda: controller.nodes.all() == [])

        call = controller.open()
        await call.write(subscribe("proxy-1"))
        snapshot = (await asyncio.wait_for(call.read(), WAIT)).snapshot
        await call.write(
            pb.ProxyMessage(ack=pb.Ack(version=snapshot.version, nonce=snapshot.nonce))
        )
        await _until(client, "False", "waiting for proxy-1 to bind")
        listeners = next(r.gateway_listeners for r in snapshot.resources if r.gateway_listeners)
        ports = [pb.BoundPort(port=x.bind_port, protocol=x.protocol) for x in listeners.listeners]
        await call.write(pb.ProxyMessage(node_status=pb.NodeStatus(bound=ports)))
        await _until(client, "True")
    finally:
        task.cancel()
