"""The whole Coxswain stack on one machine, each part its own process, wired as in production.

API emulator → load balancer (a 127.0.200.x address per LoadBalancer Service) → node agent (runs
the pods of Deployments of Coxswain images: the dedicated proxies the controller provisions) →
echo backends (their EndpointSlices written to point at them) → identity service (creates the
CA, publishes the trust bundle) → controller (watches, publishes, provisions, serves discovery
over mTLS) → shared proxy (a projected-style token and the trust bundle on disk, SVID bootstrap,
then the discovery stream) → the operator UI (`start_ui`: its own ServiceAccount token, reading
the controller's API, which allows that account). The local demo, the end-to-end tests and the
benchmarks start it, differing only in how each role is launched (`Launcher`): from source
modules, or from built PEX files; the node agent launches dedicated proxies the same way.

Everything but the dedicated proxies runs as a plain process on 127.0.0.1 (tests reach, kill
and read them as processes); each is also registered as a Pod on the node `devkit-stack`
(`process_pods`), so `kubectl get pods -A` and `kubectl logs` cover every service.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import kubernetes.utils
import yaml

from coxswain_devkit import stack_objects as objects
from coxswain_devkit.process_pods import ProcessNode, RecordedProcess
from coxswain_devkit.processes import ProcessError, ServiceProcess
from coxswain_devkit.stack_objects import PROXY_ACCOUNT, UI_ACCOUNT, UI_USER, tls_secret

__all__ = ["EchoBackend", "Launcher", "Stack", "StackPorts", "free_port", "tls_secret"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_LABEL = "gateway.networking.k8s.io/gateway-name"  # on every object provisioned for one
AUDIENCE = "coxswain-discovery"
START_TIMEOUT = 90.0
# The node agent stops its pods (each up to 10 s) before it exits itself.
STOP_GRACE = {"node": 30.0}
ROLES = ("devkit", "identity", "controller", "proxy", "ui")


@dataclass(frozen=True)
class Launcher:
    """The argv prefix that runs each role: "devkit", "identity", "controller", "proxy", "ui"."""

    prefixes: Mapping[str, Sequence[str]]

    @classmethod
    def modules(cls) -> Launcher:
        """Run each role as `python -m coxswain_<role>` with this interpreter (the demo)."""
        return cls({r: (sys.executable, "-m", f"coxswain_{r}") for r in ROLES})

    @classmethod
    def pex_files(cls, directory: Path) -> Launcher:
        """Run each role from its packaged PEX file (the end-to-end tests). The paths are made
        absolute: the node agent starts pods with them too."""
        where = directory.resolve()
        return cls({r: (sys.executable, str(where / f"coxswain-{r}.pex")) for r in ROLES})

    def argv(self, role: str, *args: str) -> list[str]:
        return [*self.prefixes[role], *args]

    def node_runs(self) -> list[str]:
        """The node agent's `--run ROLE=COMMAND` flags, so its pods start as the stack does."""
        return [f"--run={role}={shlex.join(prefix)}" for role, prefix in self.prefixes.items()]


@dataclass(frozen=True)
class StackPorts:
    """Where the shared proxy serves Ingress (Gateway listeners get derived bind ports)."""

    ingress_http: int = 18080
    ingress_https: int = 18443

    @classmethod
    def free(cls) -> StackPorts:
        """Two ports free right now on 127.0.0.1 (for tests and benchmarks running side by side)."""
        return cls(free_port(), free_port())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EchoBackend:
    namespace: str
    service: str
    process: ServiceProcess
    port: int = 0
    grpc_port: int = 0  # its gRPC echo's port, when it serves one (`Stack.grpc_echoes`)


@dataclass(frozen=True)
class Placement:
    """The Pod a process the stack runs is registered as (`process_pods`)."""

    namespace: str
    pod: str
    container: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _coxswain(name: str, container: str, **labels: str) -> Placement:
    pod = name if name.startswith("coxswain-") else f"coxswain-{name}"
    return Placement(PROXY_ACCOUNT[0], pod, container, labels)


@dataclass
class Stack:
    launcher: Launcher
    workdir: Path
    manifests: Path | None = None
    echo_services: Sequence[tuple[str, str]] = ()  # (namespace, Service) to back with an echo
    # Of those, the ones whose echo also serves the gRPC echo, as their Service's port "grpc".
    grpc_echoes: Sequence[tuple[str, str]] = ()
    ports: StackPorts = field(default_factory=StackPorts)
    proxy_args: Sequence[str] = ()
    gateway_api: str = "standard"  # the Gateway API CRDs the emulator serves ("none": Ingress only)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    echoes: list[EchoBackend] = field(default_factory=list)
    api_url: str = ""
    kubeconfig: Path | None = None
    discovery_ports: list[int] = field(default_factory=list)  # every controller started
    identity_port: int = 0
    extra_objects: Sequence[dict[str, Any]] = ()  # created right after the API server starts
    pods: ProcessNode | None = None  # the node the processes are registered on as Pods

    def start(self, *, with_proxy: bool = True) -> Stack:
        try:
            self._start_apiserver()
            # These need only the API server: started together, then each waited for.
            started = [self._spawn_load_balancer(), self._spawn_node(), self._spawn_identity()]
            echoes = self._spawn_echoes()
            lines = [process.wait_for_msg(msg, timeout=START_TIMEOUT) for process, msg in started]
            self.identity_port = int(lines[-1]["port"])
            self._wait_echoes(echoes)
            self.start_controller()
            if with_proxy:
                self.start_proxy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict[str, int]:
        """Stop every process, newest first; their exit statuses by role."""
        statuses = {}
        for role, process in reversed(list(self.processes.items())):
            try:
                statuses[role] = process.stop(grace=STOP_GRACE.get(role, 5.0))
            except ProcessError:
                statuses[role] = process.kill()
        self.processes.clear()
        if self.pods is not None:
            self.pods.close()
            self.pods = None
        return statuses

    def client(self) -> kubernetes.client.ApiClient:
        return kubernetes.client.ApiClient(kubernetes.client.Configuration(host=self.api_url))

    # ------------------------------------------------------------------ the parts

    def _run(
        self, role: str, name: str, *args: str, listening: str, pod: Placement
    ) -> dict[str, Any]:
        process = self._spawn(role, name, *args, pod=pod)
        return process.wait_for_msg(listening, timeout=START_TIMEOUT)

    def _spawn(self, role: str, name: str, *args: str, pod: Placement) -> RecordedProcess:
        process = RecordedProcess(self.launcher.argv(role, *args))
        self.processes[name] = process.start()
        self._register(process, pod)
        return process

    def _register(self, process: RecordedProcess, pod: Placement) -> None:
        if self.pods is not None:
            self.pods.register(
                process,
                namespace=pod.namespace,
                pod=pod.pod,
                container=pod.container,
                labels=pod.labels,
            )

    def _start_apiserver(self) -> None:
        self.kubeconfig = self.workdir / "kubeconfig"
        args = ["apiserver", "--address", "127.0.0.1", "--port", "0"]
        args += ["--gateway-api", self.gateway_api]
        args += ["--kubeconfig-out", str(self.kubeconfig)]
        if self.manifests is not None:
            args += ["--manifests", str(self.manifests)]
        where = Placement("kube-system", "devkit-apiserver", "apiserver")
        line = self._run("devkit", "apiserver", *args, listening="apiserver listening", pod=where)
        self.api_url = f"http://127.0.0.1:{line['port']}"
        self.pods = ProcessNode(self.api_url).start()
        self._register(_recorded(self.processes["apiserver"]), where)
        with self.client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            # What a Helm install would have made: the system namespace and the proxy's account.
            objects.create_absent(core.create_namespace, {"metadata": {"name": PROXY_ACCOUNT[0]}})
            for account in (PROXY_ACCOUNT, UI_ACCOUNT):
                objects.create_absent(
                    lambda body, ns=account[0]: core.create_namespaced_service_account(ns, body),
                    {"metadata": {"name": account[1]}},
                )
            # The shared proxies' Service: the controller mirrors its endpoints next to each
            # Gateway's VIP Service. The proxies run as processes on 127.0.0.1, not as pods.
            objects.create_absent(
                lambda body: core.create_namespaced_service(PROXY_ACCOUNT[0], body),
                objects.shared_proxy_service(),
            )
            discovery: Any = kubernetes.client.DiscoveryV1Api(client)
            objects.create_absent(
                lambda body: discovery.create_namespaced_endpoint_slice(PROXY_ACCOUNT[0], body),
                objects.shared_proxy_slice(),
            )
            create: Any = kubernetes.utils.create_from_dict  # untyped in the client
            for obj in self.extra_objects:
                create(client, obj)

    def _spawn_load_balancer(self) -> tuple[RecordedProcess, str]:
        """Each LoadBalancer Service (every Gateway's) gets its own loopback address, relayed to
        its endpoints, as a cloud load balancer would (docs/testing.md)."""
        where = Placement("kube-system", "devkit-lb", "lb")
        args = ["lb", "--api-server", self.api_url]
        return self._spawn("devkit", "lb", *args, pod=where), "load balancer started"

    def _spawn_node(self) -> tuple[RecordedProcess, str]:
        """The node agent runs the Deployments the controller provisions (dedicated proxies),
        each pod started by the stack's own launcher (docs/testing.md)."""
        where = Placement("kube-system", "devkit-node", "node")
        args = ["node", "--api-server", self.api_url, "--workdir", str(self.workdir / "node")]
        args += self.launcher.node_runs()
        return self._spawn("devkit", "node", *args, pod=where), "node agent started"

    def _spawn_identity(self) -> tuple[RecordedProcess, str]:
        args = ["serve", "--api-server", self.api_url, "--address", "127.0.0.1", "--port", "0"]
        args += ["--admin-address", "127.0.0.1", "--admin-port", "0"]
        where = _coxswain("identity", "identity")
        return self._spawn("identity", "identity", *args, pod=where), "identity listening"

    def _spawn_echoes(self) -> list[tuple[str, str, RecordedProcess]]:
        started = []
        for namespace, service in self.echo_services:
            pod = f"{service}-0"
            args = ["echo", "--address", "127.0.0.1", "--port", "0"]
            args += ["--namespace", namespace, "--pod", pod]
            if (namespace, service) in self.grpc_echoes:
                args += ["--grpc-port", "0"]
            where = Placement(namespace, pod, "echo")
            process = self._spawn("devkit", f"echo {namespace}/{service}", *args, pod=where)
            started.append((namespace, service, process))
        return started

    def _wait_echoes(self, started: list[tuple[str, str, RecordedProcess]]) -> None:
        for namespace, service, process in started:
            port = int(process.wait_for_msg("echo listening", timeout=START_TIMEOUT)["port"])
            echo = EchoBackend(namespace, service, process, port)
            if (namespace, service) in self.grpc_echoes:
                line = process.wait_for_msg("grpc echo listening", timeout=START_TIMEOUT)
                echo.grpc_port = int(line["port"])
            self.echoes.append(echo)
        with self.client() as client:
            discovery: Any = kubernetes.client.DiscoveryV1Api(client)
            for echo in self.echoes:
                piece = objects.echo_slice(echo.namespace, echo.service, echo.port, echo.grpc_port)
                discovery.create_namespaced_endpoint_slice(echo.namespace, piece)

    def start_controller(
        self, name: str = "controller", *, port: int = 0, leader_election: bool = False
    ) -> int:
        """Start a controller (another one, for failover tests); returns its discovery port."""
        election = [
            "--leader-election",
            "--pod-name",
            name,
            "--lease-duration",
            "2",
            "--lease-renew-interval",
            "0.3",
            "--lease-renew-deadline",
            "1",
        ]
        # Chosen before it starts: the dedicated proxies it provisions are told where it is.
        port = port or free_port()
        line = self._run(
            "controller", name, "serve", "--api-server", self.api_url,
            *(election if leader_election else ["--no-leader-election"]),
            "--admin-address", "127.0.0.1", "--admin-port", "0",
            "--discovery-address", "127.0.0.1", "--discovery-port", str(port),
            "--ingress-http-port", str(self.ports.ingress_http),
            "--ingress-https-port", str(self.ports.ingress_https),
            *self._provisioning_flags(port),
            # The stack's emulator enforces no RBAC (every review would allow): the UI's
            # account is allowed by name.
            "--api-authorization", "allowlist", "--api-allowed-users", UI_USER,
            listening="discovery listening", pod=_coxswain(name, "controller"),
        )  # fmt: skip
        if int(line["port"]) not in self.discovery_ports:
            self.discovery_ports.append(int(line["port"]))
        return int(line["port"])

    def _provisioning_flags(self, port: int) -> list[str]:
        """What the dedicated proxies it provisions need here: every controller and the
        identity service on 127.0.0.1, whose certificates name `localhost`."""
        ports = [*(p for p in self.discovery_ports if p != port), port]
        return [
            "--proxy-discovery-endpoint", ",".join(f"127.0.0.1:{p}" for p in ports),
            "--proxy-bootstrap-endpoint", f"127.0.0.1:{self.identity_port}",
            "--proxy-arg=--discovery-server-name=localhost",
        ]  # fmt: skip

    def start_proxy(
        self, name: str = "proxy", *, scope: Sequence[str] = ("--shared",)
    ) -> ServiceProcess:
        """Start a proxy subscribed to every controller started so far."""
        token, bundle = self._proxy_credentials()
        endpoints = ",".join(f"127.0.0.1:{p}" for p in self.discovery_ports)
        self._run(
            "proxy", name, "serve", *scope, "--node-id", name,
            "--admin-address", "127.0.0.1", "--admin-port", "0",
            "--discovery-endpoint", endpoints,
            "--discovery-bootstrap-endpoint", f"127.0.0.1:{self.identity_port}",
            "--discovery-server-name", "localhost",
            "--token-path", str(token), "--trust-bundle-path", str(bundle),
            "--listen-address", "127.0.0.1", "--workers", "1",
            "--ingress-http-port", str(self.ports.ingress_http),
            "--ingress-https-port", str(self.ports.ingress_https), *self.proxy_args,
            listening="admin server listening", pod=_proxy_placement(name, scope),
        )  # fmt: skip
        return self.processes[name]

    def start_ui(self, name: str = "ui", *, port: int = 0, controller: str = "controller") -> str:
        """Start the operator UI on 127.0.0.1 reading `controller`'s API with the UI account's
        token; returns the pages' URL."""
        token = self.workdir / "ui-token"
        with self.client() as client:
            objects.write_token(client, UI_ACCOUNT, audiences=(), path=token)
        line = self._run(
            "ui", name, "serve", "--address", "127.0.0.1", "--port", str(port),
            "--admin-address", "127.0.0.1", "--admin-port", "0",
            "--controller-url", f"http://127.0.0.1:{self.admin_port(controller)}",
            "--controller-token-file", str(token), "--refresh-seconds", "2",
            listening="ui listening", pod=_coxswain(name, "ui"),
        )  # fmt: skip
        return f"http://127.0.0.1:{line['port']}/"

    def admin_port(self, name: str) -> int:
        """The admin port a process the stack started announced."""
        lines = self.processes[name].lines
        return next(int(e["port"]) for e in lines if e.get("msg") == "admin server listening")

    def bind_ports(self, namespace: str, name: str) -> dict[str, int]:
        """The shared proxy's bind port per listener of a Gateway, as the controller's own
        translation computes it (run offline through `coxswain-controller translate`)."""
        with self.client() as client:
            custom: Any = kubernetes.client.CustomObjectsApi(client)
            gateway = custom.get_namespaced_custom_object(
                GATEWAY_GROUP, "v1", namespace, "gateways", name
            )
            cls = custom.get_cluster_custom_object(
                GATEWAY_GROUP, "v1", "gatewayclasses", gateway["spec"]["gatewayClassName"]
            )
        manifest = self.workdir / f"gateway-{namespace}-{name}.yaml"
        documents = [{**cls, "kind": "GatewayClass"}, {**gateway, "kind": "Gateway"}]
        manifest.write_text(yaml.safe_dump_all(documents))
        argv = self.launcher.argv("controller", "translate", "-f", str(manifest))
        output = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        for resource in yaml.safe_load(output)["snapshots"]["SharedPool"]:
            if resource["key"] == f"listeners/{namespace}/{name}":
                return {x["name"]: int(x["bind_port"]) for x in resource["spec"]["listeners"]}
        return {}

    def address(self, namespace: str, gateway: str, port: int) -> tuple[str, int] | None:
        """Where a Gateway's listener port answers on this machine: its own Service's load
        balancer address and port (docs/provisioning.md), once the load balancer gave one."""
        selector = f"{GATEWAY_LABEL}={gateway}"
        with self.client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            found = core.list_namespaced_service(
                namespace, label_selector=selector, _preload_content=False
            )
        for service in json.loads(found.data)["items"]:
            reached = objects.lb_reach(service, port)
            if reached is not None:
                return reached
        return None

    def _proxy_credentials(self) -> tuple[Path, Path]:
        """The files a kubelet would mount: a projected token and the trust bundle."""
        token_path = self.workdir / "token"
        with self.client() as client:
            objects.write_token(client, PROXY_ACCOUNT, audiences=[AUDIENCE], path=token_path)
            bundle = objects.wait_for_bundle(kubernetes.client.CoreV1Api(client), START_TIMEOUT)
        bundle_path = self.workdir / "ca.crt"
        bundle_path.write_text(bundle)
        return token_path, bundle_path


def _proxy_placement(name: str, scope: Sequence[str]) -> Placement:
    """A shared proxy's Pod carries the shared proxies' label (`--shared-proxy-selector`)."""
    shared = {"app.kubernetes.io/name": "coxswain-proxy"} if "--shared" in scope else {}
    return _coxswain(name, "proxy", **shared)


def _recorded(process: ServiceProcess) -> RecordedProcess:
    assert isinstance(process, RecordedProcess)
    return process
