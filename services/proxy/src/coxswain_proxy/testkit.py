"""Test doubles with real wire behaviour: an in-test controller and identity service.

The proxy's tests may not import the controller or identity services (Pants visibility rules),
so these are small grpc.aio servers of their own, on 127.0.0.1 port 0, with real TLS and
certificates minted per test (`coxswain_devkit.pki`). The controller hands each stream to the
test, which scripts it message by message: `expect()` what the proxy sent, `send()` a snapshot,
`end()` the stream with a status. Nothing here mocks grpc.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import grpc.aio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from coxswain_devkit.pki import CertificateAuthority, spiffe_id
from coxswain_proto import discovery as pb
from coxswain_proto import identity, rpc
from coxswain_routing import (
    Backend,
    HostRoutes,
    Resource,
    RouteId,
    Rule,
    compile_router,
    resource_hash,
    snapshot_version,
    to_wire,
)

T = TypeVar("T")

TIMEOUT = 15.0  # seconds: generous, only ever reached when a test is failing
TRUST_DOMAIN = "cluster.local"
PROXY_ID = spiffe_id(TRUST_DOMAIN, "coxswain-system", "coxswain-proxy")
TOKEN = "projected-token"  # noqa: S105 (a test value)
PORT = 8080


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, TIMEOUT)


# ------------------------------------------------------------------------------- snapshots


def routes(host: str, name: str = "web") -> HostRoutes:
    rule = Rule(id=RouteId(100, "default", name), backends=(Backend(endpoints="endpoints/a/b/80"),))
    return HostRoutes("gateway/default/gw", PORT, host, (rule,))


def hashes_of(resources: Iterable[Resource]) -> dict[str, str]:
    return {r.key: resource_hash(r) for r in resources}


def full(resources: Iterable[Resource], *, nonce: str = "n1", seq: int = 1) -> pb.Snapshot:
    resources = list(resources)
    return pb.Snapshot(
        version=snapshot_version(hashes_of(resources)),
        nonce=nonce,
        full=True,
        resources=[to_wire(r) for r in sorted(resources, key=lambda r: r.key)],
        publish_seq=seq,
    )


def delta(
    after: Iterable[Resource],
    changed: Iterable[Resource],
    removed: Iterable[str] = (),
    *,
    nonce: str = "n2",
    seq: int = 2,
) -> pb.Snapshot:
    """A delta carrying `changed` and `removed`, claiming the version of the set `after`."""
    return pb.Snapshot(
        version=snapshot_version(hashes_of(after)),
        nonce=nonce,
        full=False,
        resources=[to_wire(r) for r in changed],
        removed=list(removed),
        publish_seq=seq,
    )


def answers(state: Any, host: str) -> bool:
    """Whether the routing in `state` routes a GET / for `host` on the test port."""
    outcome = compile_router(state.resources.values()).match(PORT, host, "GET", "/")
    return getattr(outcome, "status", 404) == 200


# -------------------------------------------------------------------------------- identity


@dataclass
class Identity:
    """An identity service signing every CSR with `signer` for `spiffe`, server-auth TLS."""

    signer: CertificateAuthority
    now: Callable[[], float]  # the clock certificates are dated by
    lifetime: float = 4 * 3600.0
    spiffe: str = PROXY_ID
    issued: list[x509.Certificate] = field(default_factory=list)
    port: int = 0

    async def issue(
        self, request: identity.IssueSvidRequest, context: grpc.aio.ServicerContext
    ) -> identity.IssueSvidResponse:
        if request.token != TOKEN:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "token not accepted")
        csr = x509.load_pem_x509_csr(request.csr_pem)
        certificate = self._sign(csr.public_key())
        self.issued.append(certificate)
        return identity.IssueSvidResponse(
            certificate_chain_pem=certificate.public_bytes(serialization.Encoding.PEM),
            trust_bundle_pem=self.signer.certificate_pem,
            not_after_seconds=int(certificate.not_valid_after_utc.timestamp()),
        )

    def _sign(self, public_key: Any) -> x509.Certificate:
        now = datetime.datetime.fromtimestamp(self.now(), datetime.UTC)
        # Dated two hours back, so a clock fast-forwarded by less than that still sees the
        # real TLS handshake's time inside the window; half-life lands at lifetime/2 - 1 h.
        start = now - datetime.timedelta(hours=2)
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.signer.certificate.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(now + datetime.timedelta(seconds=self.lifetime))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(self.spiffe)]),
                critical=True,
            )
            .sign(self.signer.key, hashes.SHA256())
        )


async def start_identity(serving_ca: CertificateAuthority, service: Identity) -> grpc.aio.Server:
    server = grpc.aio.server()
    rpc.add_identity_handler(server, service.issue)
    cert = serving_ca.issue(dns=["localhost"], ips=["127.0.0.1"])
    credentials = grpc.ssl_server_credentials([(cert.key_pem, cert.chain_pem)])
    service.port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    return server


# ------------------------------------------------------------------------------ controller


End = tuple[grpc.StatusCode, str]


@dataclass(frozen=True)
class Refusal:
    code: grpc.StatusCode
    details: str
    before_reading: bool  # like "not the leader": refused before Subscribe is even read


class ServerStream:
    """One proxy's stream as the controller sees it, scripted by the test."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        auth = context.auth_context()
        self.peer_spiffe_id = b"".join(auth.get("peer_spiffe_id", [])).decode()
        self.peer_cert_pem = b"".join(auth.get("x509_pem_cert", []))
        self.received: asyncio.Queue[pb.ProxyMessage] = asyncio.Queue()
        self.outgoing: asyncio.Queue[pb.ControllerMessage | End | None] = asyncio.Queue()
        self.client_done = asyncio.Event()  # the proxy half-closed (or the stream ended)

    async def expect(self, kind: str) -> Any:
        """The next message the proxy sent, which must be of `kind` (e.g. "ack")."""
        message = await within(self.received.get())
        value = getattr(message, kind)
        assert value is not None, f"expected {kind}, got {message}"
        return value

    def send(self, snapshot: pb.Snapshot) -> None:
        self.outgoing.put_nowait(pb.ControllerMessage(snapshot=snapshot))

    def end(self, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, details: str = "") -> None:
        self.outgoing.put_nowait((code, details))

    async def consume(self, requests: AsyncIterator[pb.ProxyMessage]) -> None:
        try:
            async for message in requests:
                self.received.put_nowait(message)
        finally:
            self.client_done.set()


class Controller:
    """A discovery server whose streams the test drives; `refuse()` scripts rejections."""

    def __init__(self) -> None:
        self.streams: asyncio.Queue[ServerStream] = asyncio.Queue()
        self.refusals: list[Refusal] = []  # the next streams are refused with these, in order
        self.refused = 0
        self.port = 0
        self.server: grpc.aio.Server | None = None

    def refuse(self, code: grpc.StatusCode, details: str, *, before_reading: bool = False) -> None:
        self.refusals.append(Refusal(code, details, before_reading))

    async def next_stream(self) -> ServerStream:
        return await within(self.streams.get())

    async def handle(
        self, requests: AsyncIterator[pb.ProxyMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ControllerMessage]:
        if self.refusals:
            self.refused += 1
            refusal = self.refusals.pop(0)
            if not refusal.before_reading:
                await anext(aiter(requests))
            await context.abort(refusal.code, refusal.details)
        stream = ServerStream(context)
        consumer = asyncio.ensure_future(stream.consume(requests))
        self.streams.put_nowait(stream)
        try:
            while (item := await stream.outgoing.get()) is not None:
                if isinstance(item, tuple):
                    await context.abort(*item)
                    return
                yield item
        finally:
            consumer.cancel()


async def start_controller(ca: CertificateAuthority, controller: Controller) -> grpc.aio.Server:
    server = grpc.aio.server()
    rpc.add_discovery_handler(server, controller.handle)
    cert = ca.issue(dns=["localhost"], ips=["127.0.0.1"])
    credentials = grpc.ssl_server_credentials(
        [(cert.key_pem, cert.chain_pem)],
        root_certificates=ca.certificate_pem,
        require_client_auth=True,
    )
    controller.port = server.add_secure_port("127.0.0.1:0", credentials)
    controller.server = server
    await server.start()
    return server


# ---------------------------------------------------------------------------------- clock


class FakeClock:
    """A clock that moves only when told: `sleep()` waits for `advance()` to pass its deadline."""

    def __init__(self, now: float) -> None:
        self._now = now
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self.sleeping = asyncio.Event()  # set whenever someone starts sleeping

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + seconds, future))
        self.sleeping.set()
        await future

    def advance(self, seconds: float) -> None:
        self._now += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self._now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for _, future in due:
            if not future.done():
                future.set_result(None)
