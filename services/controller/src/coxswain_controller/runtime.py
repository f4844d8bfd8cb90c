"""Everything `coxswain-controller serve` runs, started and stopped in the right order.

sources (watches → cache) → publisher (debounced translate → registry) → discovery server;
leader election decides who writes status and Events, who provisions each Gateway's objects
(the provisioner, fed each pass's desired objects) and who serves streams. Shutdown reverses
it: discovery first (proxies move to the next leader), then the elector (releasing the Lease),
then the watches.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field
from typing import Any

import grpc.aio

from coxswain_controller.discovery import (
    ca_secret,
    credentials,
    listener,
    nodes,
    registry,
)
from coxswain_controller.kube import client as kubeclient
from coxswain_controller.leader import election, leadership, pod
from coxswain_controller.provisioner import resources as provisioner_resources
from coxswain_controller.provisioner.provisioner import Actual, Provisioner
from coxswain_controller.publish import Publisher
from coxswain_controller.sources import kinds, supervisor
from coxswain_controller.status.events import EventRecorder
from coxswain_controller.status.writer import StatusWriter
from coxswain_controller.translate import Inputs, Options, scopes
from coxswain_controller.translate.inputs import KINDS
from coxswain_service import tasks
from coxswain_service.readiness import Readiness

log = logging.getLogger(__name__)

__all__ = ["Runtime"]

DISCOVERY_GRACE_SECONDS = 2.0


@dataclass
class Runtime:
    args: argparse.Namespace
    readiness: Readiness
    leadership: leadership.Leadership = field(default_factory=leadership.Leadership)
    registry: registry.SnapshotRegistry = field(default_factory=registry.SnapshotRegistry)
    nodes: nodes.NodeRegistry = field(default_factory=nodes.NodeRegistry)
    publisher: Publisher | None = None  # the operator API reads its last pass
    discovery_port: int | None = None  # None until the discovery listener is up
    _client: Any = None
    _sources: supervisor.Sources | None = None
    _elector: election.Elector | None = None
    _discovery: grpc.aio.Server | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        args = self.args
        self._client = kubeclient.api_client(api_server=args.api_server, kubeconfig=args.kubeconfig)
        if self._client is None:
            self.readiness.await_(
                "kubernetes", "no Kubernetes API configured (--kubeconfig, --api-server)"
            )
            self.leadership.set(True)  # no Lease to elect over: a lone replica leads
            await self._start_discovery(None)
            return
        self.readiness.await_("caches", "watch caches not synced yet")
        self.readiness.await_("snapshot", "no snapshot published yet")
        self._sources = supervisor.Sources(
            self._client, ingress_controller=args.ingress_controller_name, on_access=self._access
        )
        self._sources.start()
        confirm = self._start_election()
        publisher = Publisher(
            inputs=self._inputs,
            registry=self.registry,
            nodes=self.nodes,
            leadership=self.leadership,
            options=_options(args),
            writer=(
                writer := StatusWriter(
                    self._client, controller_name=args.controller_name, confirm_leader=confirm
                )
            ),
            events=EventRecorder(self._client, confirm_leader=confirm),
            provisioner=(
                provisioner := Provisioner(
                    self._client,
                    actual=self._provisioned,
                    controller_name=args.controller_name,
                    confirm_leader=confirm,
                    events=EventRecorder(self._client, confirm_leader=confirm),
                )
            ),
        )
        self.publisher = publisher
        self._spawn(writer.run(), "status-writer")
        self._spawn(provisioner.run(), "provisioner")
        self._spawn(publisher.run(), "publisher")
        self._spawn(self._feed(publisher), "cache-feed")
        self._spawn(self._start_discovery(self._client), "discovery-start", may_end=True)

    async def stop(self) -> None:
        if self._discovery is not None:
            await self._discovery.stop(DISCOVERY_GRACE_SECONDS)
        if self._elector is not None:
            await self._elector.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._sources is not None:
            await self._sources.stop()
        if self._client is not None:
            await asyncio.to_thread(self._client.close)

    @property
    def client(self) -> Any:
        """The Kubernetes API client (None without one): the operator API's reviews and logs."""
        return self._client

    @property
    def sources(self) -> supervisor.Sources | None:
        return self._sources

    @property
    def options(self) -> Options:
        """What translation runs with (the operator API's migration report reads so too)."""
        return _options(self.args)

    def _inputs(self) -> Inputs:
        assert self._sources is not None
        snapshot = self._sources.cache.snapshot()
        return Inputs({kind: snapshot.of(kind) for kind in KINDS})

    def _provisioned(self) -> Actual:
        """What exists of the kinds the provisioner makes, as the watch cache holds it."""
        assert self._sources is not None
        snapshot = self._sources.cache.snapshot()
        return {kind: snapshot.of(kind) for kind in provisioner_resources.KINDS}

    def _access(self, kind: kinds.Kind, refused: str | None) -> None:
        """A kind the API server refuses to list or watch (RBAC) keeps the controller unready,
        the reason naming the verb and the resource, until the watch works again."""
        key = f"access-{kind.name}"
        if refused is None:
            self.readiness.satisfy(key)
        else:
            self.readiness.await_(key, refused)

    def _start_election(self) -> Any:
        args = self.args
        if not args.leader_election:
            self.leadership.set(True)

            async def always() -> bool:
                return True

            return always
        settings = election.ElectionSettings(
            identity=args.pod_name,
            namespace=args.leader_election_namespace,
            lease_duration=args.lease_duration,
            renew_interval=args.lease_renew_interval,
            renew_deadline=args.lease_renew_deadline,
            pod=pod.PodRef(args.pod_namespace, args.pod_name),
        )
        self._elector = election.Elector(self._client, self.leadership, settings)
        self._elector.start()
        return self._elector.confirm

    async def _feed(self, publisher: Publisher) -> None:
        """Every cache change that matters schedules a rebuild; readiness follows the first ones."""
        assert self._sources is not None
        cache = self._sources.cache
        await cache.synced.wait()
        self.readiness.satisfy("caches")
        publisher.changed()
        self._spawn(self._first_publish(publisher), "first-publish", may_end=True)
        while True:
            await cache.changed.wait()
            cache.changed.clear()
            publisher.changed()

    async def _first_publish(self, publisher: Publisher) -> None:
        await publisher.published.wait()
        self.readiness.satisfy("snapshot")
        log.info("first snapshot published", extra={"fields": {"seq": self.registry.seq}})

    async def _start_discovery(self, client: Any) -> None:
        args = self.args
        if args.ca_cert_file is not None and args.ca_key_file is not None:
            ca = credentials.CertificateAuthority(
                args.ca_cert_file.read_bytes(), args.ca_key_file.read_bytes()
            )
        elif client is not None:
            namespace, _, name = args.ca_secret.partition("/")
            self.readiness.await_(
                "discovery", f"waiting for the discovery CA Secret {args.ca_secret}"
            )
            ca = await ca_secret.wait_for_ca(client, namespace, name)
        else:
            self.readiness.await_(
                "discovery",
                "no discovery CA configured (--ca-secret or --ca-cert-file/--ca-key-file)",
            )
            return
        ns, _, sa = args.shared_proxy_identity.partition("/")
        settings = listener.DiscoverySettings(
            address=args.discovery_address,
            port=args.discovery_port,
            ca=ca,
            dns_names=tuple(n for n in args.discovery_dns.split(",") if n),
            trust_domain=args.trust_domain,
            shared_proxy=scopes.Identity(ns, sa),
        )
        self._discovery, self.discovery_port = await listener.start(
            settings, registry=self.registry, nodes=self.nodes, leadership=self.leadership
        )
        self.readiness.satisfy("discovery")

    def _spawn(self, coro: Any, name: str, *, may_end: bool = False) -> None:
        self._tasks.append(tasks.spawn(coro, name=name, may_end=may_end))


def _options(args: argparse.Namespace) -> Options:
    return Options(
        gateway_controller=args.controller_name,
        ingress_controller=args.ingress_controller_name,
        ingress_http_port=args.ingress_http_port,
        ingress_https_port=args.ingress_https_port,
        published_service=args.published_service,
        **provisioning_options(args),
    )


def provisioning_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Options fields the provisioning flags set (serve's and translate's)."""
    return {
        "vip_service_type": args.vip_service_type,
        "shared_proxy_service": args.shared_proxy_service,
        "shared_proxy_selector": tuple(args.shared_proxy_selector),
        "proxy_image": args.proxy_image,
        "proxy_discovery_endpoint": args.proxy_discovery_endpoint,
        "proxy_bootstrap_endpoint": args.proxy_bootstrap_endpoint,
        "proxy_args": tuple(args.proxy_arg),
        "trust_bundle_configmap": args.trust_bundle_configmap,
    }


def default_pod_name() -> str:
    return socket.gethostname()
