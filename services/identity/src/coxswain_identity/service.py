"""The identity service put together: Kubernetes client, gRPC listener, CA follower, publisher.

Flow: the Secret watcher (a thread) reports each state of the CA Secret; `_follow` applies them
one at a time on the event loop: a usable CA becomes the signing authority, the listener's new
serving certificate and the published trust bundle; a missing Secret is created in `auto` mode
and means "serve nothing" in `external` mode; an unusable one means "serve nothing" in both
(fail closed: an operator's mistake stops issuance, it never signs with a key we cannot check).
Readiness names what is missing. The gRPC listener is bound once at start and never restarted
(see `serving`).
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import logging
from dataclasses import dataclass
from typing import Any

import grpc.aio
import kubernetes

from coxswain_identity import (
    ca,
    ca_watch,
    errors,
    kube,
    server,
    serving,
    tokens,
    trust,
)
from coxswain_service import tasks
from coxswain_service.readiness import Readiness

log = logging.getLogger(__name__)

# In-flight IssueSvid calls get this long on shutdown: well inside the 5 s SIGTERM budget.
GRPC_GRACE_SECONDS = 1.0
CREATE_RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0, 10.0)
# A request is a token and a CSR (`validate.TOKEN_MAX`, `validate.CSR_MAX`): anything larger is
# refused by grpc (RESOURCE_EXHAUSTED) before it is even read into a message.
MAX_REQUEST_BYTES = 64 * 1024
GRPC_OPTIONS = [("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]


@dataclass(frozen=True, slots=True)
class Settings:
    address: str  # --address: where the IssueSvid listener binds
    port: int  # --port: 50052, 0 for any
    ca_mode: ca.Mode  # --ca-mode
    ca_secret: ca.ObjectRef  # --ca-secret
    serving_dns: tuple[str, ...]  # --serving-dns: the serving certificate's DNS names
    policy: server.Policy  # --trust-domain, --svid-ttl
    shared_proxy: tokens.ServiceAccount  # --shared-proxy-service-account
    api_server: str | None = None  # --api-server: a plain URL (tests)
    kubeconfig: str | None = None  # --kubeconfig


class Service:
    """One replica. `start()` binds and begins following the CA; `stop()` undoes all of it."""

    def __init__(self, settings: Settings, readiness: Readiness) -> None:
        self.settings = settings
        self._readiness = readiness
        self._readiness.await_("listener", "IssueSvid listener not serving yet")
        self._readiness.await_("ca", "no certificate authority loaded yet")
        self._authority: ca.Authority | None = None
        self._secrets: asyncio.Queue[ca_watch.SecretData] = asyncio.Queue()
        self._tasks: list[asyncio.Task[Any]] = []
        self._client: Any = None
        self._grpc: grpc.aio.Server | None = None
        self._watcher: ca_watch.SecretWatcher | None = None
        self._credentials = serving.ServingCredentials(*serving.placeholder(now=_now()))
        self._publisher: trust.Publisher | None = None
        self.port = 0

    def authority(self) -> ca.Authority | None:
        return self._authority

    async def start(self) -> None:
        try:
            self._client = kube.connect(
                api_server=self.settings.api_server, kubeconfig=self.settings.kubeconfig
            )
        except kube.ConfigError as exc:
            # Nothing to serve without the API: stay up, unready, saying why.
            log.error("cannot reach Kubernetes", extra={"fields": {"error": str(exc)}})
            self._readiness.await_("kube", str(exc))
            return
        core = kubernetes.client.CoreV1Api(self._client)
        await self._listen()
        publisher = trust.Publisher(core, self._trust_ref())
        self._publisher = publisher
        self._tasks = [
            tasks.spawn(publisher.run(), name="trust-publisher"),
            tasks.spawn(self._follow(core), name="ca-follower"),
        ]
        loop = asyncio.get_running_loop()

        def report(data: ca_watch.SecretData) -> None:  # runs on the watcher's thread
            loop.call_soon_threadsafe(self._secrets.put_nowait, data)

        self._watcher = ca_watch.SecretWatcher(core, self.settings.ca_secret, report)
        self._watcher.start()

    async def stop(self) -> None:
        if self._grpc is not None:
            await self._grpc.stop(GRPC_GRACE_SECONDS)
        await tasks.cancel(*self._tasks)
        if self._watcher is not None:
            await asyncio.to_thread(self._watcher.stop)
        if self._client is not None:
            self._client.close()

    async def _listen(self) -> None:
        issuer = server.Issuer(
            self.authority,
            kubernetes.client.AuthenticationV1Api(self._client),
            tokens.Allowlist(
                kubernetes.client.CustomObjectsApi(self._client), self.settings.shared_proxy
            ),
            policy=self.settings.policy,
        )
        self._grpc = grpc.aio.server(options=GRPC_OPTIONS)
        issuer.add_to(self._grpc)
        address = f"{self.settings.address}:{self.settings.port}"
        self.port = self._grpc.add_secure_port(address, self._credentials.credentials())
        await self._grpc.start()
        self._readiness.satisfy("listener")
        log.info("identity listening", extra={"fields": {"port": self.port}})

    def _trust_ref(self) -> ca.ObjectRef:
        return ca.ObjectRef(self.settings.ca_secret.namespace, trust.TRUST_CONFIGMAP)

    async def _follow(self, core: Any) -> None:
        while True:
            data = await self._secrets.get()
            if data is None:
                await self._secret_missing(core)
                continue
            try:
                self._use(ca.from_secret_data(data, now=_now()))
            except errors.InvalidCa as exc:
                self._drop(f"CA Secret {self.settings.ca_secret} is not usable: {exc}")

    async def _secret_missing(self, core: Any) -> None:
        ref = self.settings.ca_secret
        if self.settings.ca_mode is ca.Mode.EXTERNAL:
            self._drop(f"CA Secret {ref} not found (--ca-mode external)")
            return
        for attempt in itertools.count():
            try:
                self._use(await asyncio.to_thread(ca.create, core, ref))
                return
            except (errors.Unavailable, errors.InvalidCa, errors.CaMissing) as exc:
                self._drop(f"CA Secret {ref} could not be created: {exc}")
            if not self._secrets.empty():
                return  # the Secret changed meanwhile: its new state decides
            await asyncio.sleep(CREATE_RETRY_SECONDS[min(attempt, len(CREATE_RETRY_SECONDS) - 1)])

    def _use(self, authority: ca.Authority) -> None:
        current = self._authority
        if current and (current.fingerprint, current.bundle_pem) == (
            authority.fingerprint,
            authority.bundle_pem,
        ):
            return
        self._credentials.update(*serving.issue(authority, self.settings.serving_dns, now=_now()))
        self._authority = authority
        self._readiness.satisfy("ca")
        assert self._publisher is not None
        self._publisher.want(authority.bundle_pem.decode())
        log.info(
            "certificate authority loaded",
            extra={
                "fields": {
                    "secret": str(self.settings.ca_secret),
                    "fingerprint": authority.fingerprint,
                    "not_after": authority.not_after.isoformat(),
                }
            },
        )

    def _drop(self, reason: str) -> None:
        if self._authority is not None or reason not in self._readiness.reasons:
            log.error(
                "no certificate authority: serving nothing", extra={"fields": {"reason": reason}}
            )
        self._authority = None
        self._readiness.await_("ca", reason)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
