"""The discovery client: credentials, dialling, reconnecting; the proxy's side of the protocol.

Where it sits: `cli.serve` starts `DiscoveryClient.run()` as a background task. Each turn of its
loop makes sure it holds a current SVID (`SvidIssuer`), dials the current endpoint and
hands the call to a `stream.StreamSession`, then reads how the stream ended to pick the next
move (`lifecycle.classify`): at once on the next endpoint, after a backoff, or never again.

Why the shape: docs/discovery.md, "The proxy's side". What survives a stream lives here (the
SVID, the backoff, the endpoint rotation, and through the `RoutingHolder` the routing itself);
what lives for one stream lives in `stream.py`. The held routing is only ever replaced by a
newer snapshot, never cleared: a proxy that loses its controller keeps serving.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import grpc.aio

from coxswain_proto import discovery as pb
from coxswain_proto import rpc
from coxswain_proxy.discovery import endpoints, failures, metrics, ports
from coxswain_proxy.discovery.backoff import Backoff, BackoffPolicy
from coxswain_proxy.discovery.clock import Clock, SystemClock
from coxswain_proxy.discovery.holder import RoutingHolder
from coxswain_proxy.discovery.lifecycle import Lifecycle, Phase, Verdict, classify
from coxswain_proxy.discovery.stream import StreamEnd, StreamSession
from coxswain_proxy.discovery.svid import Svid, SvidIssuer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    endpoints: tuple[endpoints.Endpoint, ...]  # --discovery-endpoint, tried in turn
    node_id: str  # --node-id: stable per proxy process
    scope: pb.Scope  # SharedPool, or one Gateway
    server_name: str | None = None  # --discovery-server-name; None: the endpoint's host
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


class DiscoveryClient:
    def __init__(
        self,
        config: ClientConfig,
        *,
        issuer: SvidIssuer,
        holder: RoutingHolder,
        bound: ports.BoundPorts,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        on_stop: Callable[[str], None] = lambda _: None,
        on_connection: Callable[[bool], None] = lambda _: None,
    ) -> None:
        self._config = config
        self._issuer = issuer
        self._holder = holder
        self._bound = bound
        self._clock = clock or SystemClock()
        self._rand = rand
        self._on_stop = on_stop  # told why, once discovery has stopped for good
        self._on_connection = on_connection  # told when a stream starts or stops delivering
        self._backoff = Backoff(config.backoff, rand)
        self._rotation = endpoints.Rotation(config.endpoints)
        self._lifecycle = Lifecycle()
        self._svid: Svid | None = None
        self._not_leader_streak = 0

    @property
    def phase(self) -> Phase:
        return self._lifecycle.phase

    @property
    def svid(self) -> Svid | None:
        return self._svid

    async def run(self) -> None:
        """Until cancelled, or until a wire-version mismatch makes retrying pointless."""
        try:
            while True:
                current = await self._credentials()
                if current is None:
                    await self._back_off()
                    continue
                end = await self._session(current)
                if await self._after(end):
                    return
        finally:
            self._connected(False)

    async def _after(self, end: StreamEnd) -> bool:
        """Act on how a stream ended; True when discovery must stop."""
        if end.renewed is not None:
            self._adopt(end.renewed)
            return False  # redial the same endpoint at once, with the new SVID
        verdict = classify(end.code, end.details)
        log.info(
            "discovery stream ended",
            extra={"fields": {"code": end.code.name, "details": end.details, "next": verdict}},
        )
        if verdict is Verdict.STOP:
            self._stop(end)
            return True
        self._rotation.advance()
        if verdict is Verdict.NOT_LEADER and self._fast_retry():
            return False
        await self._back_off()
        return False

    async def _credentials(self) -> Svid | None:
        """The SVID to dial with: the held one while it is valid, else a fresh one (or None)."""
        if self._svid is not None and self._clock.now() < self._svid.not_after:
            return self._svid
        self._lifecycle.enter(Phase.OBTAINING)
        try:
            obtained = await self._issuer.obtain()
        except failures.CredentialsError as exc:
            log.warning("could not obtain an SVID", extra={"fields": {"reason": str(exc)}})
            return None
        self._adopt(obtained)
        return obtained

    def _adopt(self, obtained: Svid) -> None:
        self._svid = obtained
        metrics.SVID_EXPIRY.set(obtained.not_after)
        fields = {"spiffe_id": obtained.spiffe_id, "not_after": obtained.not_after}
        log.info("SVID obtained", extra={"fields": fields})

    async def _session(self, current: Svid) -> StreamEnd:
        self._lifecycle.enter(Phase.DIALING)
        endpoint = self._rotation.current
        log.info("dialling the controller", extra={"fields": {"endpoint": str(endpoint)}})
        credentials = grpc.ssl_channel_credentials(
            # Re-read at each dial: during a CA rotation the bundle gains the new CA before the
            # controller's serving certificate moves to it (docs/security.md).
            root_certificates=self._issuer.trust_bundle(current.trust_bundle_pem),
            private_key=current.key_pem,
            certificate_chain=current.chain_pem,
        )
        options = endpoints.channel_options(self._config.server_name)
        channel = grpc.aio.secure_channel(endpoint.target, credentials, options=options)
        call = rpc.discovery_stream(channel)()
        try:
            session = StreamSession(
                call,
                self._subscribe(),
                holder=self._holder,
                bound=self._bound,
                on_delivery=self._delivered,
            )
            return await session.run(self._renewal(current))
        finally:
            self._connected(False)
            # Close the stream, then the channel (on shutdown too: this runs on cancellation).
            call.cancel()
            await channel.close()

    def _subscribe(self) -> pb.Subscribe:
        return pb.Subscribe(
            node_id=self._config.node_id,
            wire_version=rpc.WIRE_VERSION,
            scope=self._config.scope,
        )

    def _delivered(self) -> None:
        """The stream works: reset the failure counters and say we are connected."""
        self._lifecycle.enter(Phase.STREAMING)
        self._backoff.reset()
        self._not_leader_streak = 0
        self._connected(True)

    def _connected(self, connected: bool) -> None:
        metrics.DISCOVERY_CONNECTED.set(1 if connected else 0)
        self._on_connection(connected)

    async def _renewal(self, current: Svid) -> Svid:
        """A new SVID, obtained from half way through `current`'s lifetime on.

        docs/discovery.md, step 4: "Renew the SVID at half its lifetime and reconnect with it,
        keeping the held snapshot." Failures retry with backoff while the stream, already
        authenticated, carries on with the old certificate.
        """
        await self._clock.sleep(current.renew_at - self._clock.now())
        retry = Backoff(self._config.backoff, self._rand)
        while True:
            try:
                return await self._issuer.obtain()
            except failures.CredentialsError as exc:
                log.warning("SVID renewal failed", extra={"fields": {"reason": str(exc)}})
                await self._clock.sleep(retry.next_delay(holding=True))

    def _fast_retry(self) -> bool:
        # "the proxy fast-retries until it lands on the real leader" (spec 001): one immediate
        # try per endpoint; if every endpoint says so (a leader election in progress), the
        # backoff paces the next round instead of a hot loop.
        self._not_leader_streak += 1
        return self._not_leader_streak <= len(self._rotation)

    async def _back_off(self) -> None:
        self._not_leader_streak = 0
        delay = self._backoff.next_delay(holding=self._holder.state is not None)
        self._lifecycle.enter(Phase.WAITING)
        log.info("retrying discovery later", extra={"fields": {"delay_seconds": round(delay, 3)}})
        await self._clock.sleep(delay)

    def _stop(self, end: StreamEnd) -> None:
        self._lifecycle.enter(Phase.STOPPED)
        metrics.DISCOVERY_STOPPED.set(1)
        reason = (
            f"discovery stopped: wire version mismatch: this proxy speaks wire version "
            f"{rpc.WIRE_VERSION}, the controller said: {end.details}"
        )
        # docs/discovery.md, step 2: "A wire-version mismatch stops retrying with a log line
        # naming both versions."
        log.error(reason, extra={"fields": {"proxy_wire_version": rpc.WIRE_VERSION}})
        self._on_stop(reason)
