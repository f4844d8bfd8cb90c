"""The whole Coxswain stack on one machine, each part its own process, wired as in production.

API emulator → echo backends (their EndpointSlices written to point at them) → identity service
(creates the CA, publishes the trust bundle) → controller (watches, publishes, serves discovery
over mTLS) → shared proxy (a projected-style token and the trust bundle on disk, SVID bootstrap,
then the discovery stream). The local demo and the end-to-end tests both start it, differing
only in how each role is launched (`Launcher`): from source modules, or from built PEX files.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import kubernetes.utils
import yaml

from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ProcessError, ServiceProcess

__all__ = ["EchoBackend", "Launcher", "Stack", "StackPorts", "free_port", "tls_secret"]

GATEWAY_GROUP = "gateway.networking.k8s.io"
TRUST_CONFIGMAP = ("coxswain-system", "coxswain-discovery-trust")
PROXY_ACCOUNT = ("coxswain-system", "coxswain-proxy")
AUDIENCE = "coxswain-discovery"
START_TIMEOUT = 90.0


@dataclass(frozen=True)
class Launcher:
    """The argv prefix that runs each role: "devkit", "identity", "controller", "proxy"."""

    prefixes: Mapping[str, Sequence[str]]

    @classmethod
    def modules(cls) -> Launcher:
        """Run each role as `python -m coxswain_<role>` with this interpreter (the demo)."""
        roles = ("devkit", "identity", "controller", "proxy")
        return cls({r: (sys.executable, "-m", f"coxswain_{r}") for r in roles})

    @classmethod
    def pex_files(cls, directory: Path) -> Launcher:
        """Run each role from its packaged PEX file (the end-to-end tests)."""
        roles = ("devkit", "identity", "controller", "proxy")
        return cls({r: (sys.executable, str(directory / f"coxswain-{r}.pex")) for r in roles})

    def argv(self, role: str, *args: str) -> list[str]:
        return [*self.prefixes[role], *args]


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


@dataclass
class Stack:
    launcher: Launcher
    workdir: Path
    manifests: Path | None = None
    echo_services: Sequence[tuple[str, str]] = ()  # (namespace, Service) to back with an echo
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

    def start(self, *, with_proxy: bool = True) -> Stack:
        try:
            self._start_apiserver()
            self._start_load_balancer()
            self._start_echoes()
            self._start_identity()
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
                statuses[role] = process.stop()
            except ProcessError:
                statuses[role] = process.kill()
        self.processes.clear()
        return statuses

    def client(self) -> kubernetes.client.ApiClient:
        return kubernetes.client.ApiClient(kubernetes.client.Configuration(host=self.api_url))

    # ------------------------------------------------------------------ the parts

    def _run(self, role: str, name: str, *args: str, listening: str) -> dict[str, Any]:
        process = ServiceProcess(self.launcher.argv(role, *args)).start()
        self.processes[name] = process
        return process.wait_for_msg(listening, timeout=START_TIMEOUT)

    def _start_apiserver(self) -> None:
        self.kubeconfig = self.workdir / "kubeconfig"
        args = ["apiserver", "--address", "127.0.0.1", "--port", "0"]
        args += ["--gateway-api", self.gateway_api]
        args += ["--kubeconfig-out", str(self.kubeconfig)]
        if self.manifests is not None:
            args += ["--manifests", str(self.manifests)]
        line = self._run("devkit", "apiserver", *args, listening="apiserver listening")
        self.api_url = f"http://127.0.0.1:{line['port']}"
        with self.client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            # What a Helm install would have made: the system namespace and the proxy's account.
            _create_absent(core.create_namespace, {"metadata": {"name": PROXY_ACCOUNT[0]}})
            _create_absent(
                lambda body: core.create_namespaced_service_account(PROXY_ACCOUNT[0], body),
                {"metadata": {"name": PROXY_ACCOUNT[1]}},
            )
            # The shared proxies' Service: the controller mirrors its endpoints next to each
            # Gateway's VIP Service. The proxies run as processes on 127.0.0.1, not as pods.
            _create_absent(
                lambda body: core.create_namespaced_service(PROXY_ACCOUNT[0], body),
                _shared_proxy_service(),
            )
            discovery: Any = kubernetes.client.DiscoveryV1Api(client)
            _create_absent(
                lambda body: discovery.create_namespaced_endpoint_slice(PROXY_ACCOUNT[0], body),
                _shared_proxy_slice(),
            )
            create: Any = kubernetes.utils.create_from_dict  # untyped in the client
            for obj in self.extra_objects:
                create(client, obj)

    def _start_load_balancer(self) -> None:
        """Each LoadBalancer Service (every shared Gateway's VIP) gets its own loopback address,
        relayed to the shared proxy, as a cloud load balancer would (docs/testing.md)."""
        self._run(
            "devkit", "lb", "lb", "--api-server", self.api_url, listening="load balancer started"
        )

    def _start_echoes(self) -> None:
        for namespace, service in self.echo_services:
            pod = f"{service}-0"
            args = [
                "echo",
                "--address",
                "127.0.0.1",
                "--port",
                "0",
                "--namespace",
                namespace,
                "--pod",
                pod,
            ]
            process = ServiceProcess(self.launcher.argv("devkit", *args)).start()
            self.processes[f"echo {namespace}/{service}"] = process
            port = int(process.wait_for_msg("echo listening", timeout=START_TIMEOUT)["port"])
            self.echoes.append(EchoBackend(namespace, service, process, port))
        with self.client() as client:
            discovery: Any = kubernetes.client.DiscoveryV1Api(client)
            for echo in self.echoes:
                discovery.create_namespaced_endpoint_slice(echo.namespace, _endpoint_slice(echo))

    def _start_identity(self) -> None:
        line = self._run(
            "identity", "identity", "serve", "--api-server", self.api_url,
            "--address", "127.0.0.1", "--port", "0",
            "--admin-address", "127.0.0.1", "--admin-port", "0",
            listening="identity listening",
        )  # fmt: skip
        self.identity_port = int(line["port"])

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
        line = self._run(
            "controller", name, "serve", "--api-server", self.api_url,
            *(election if leader_election else ["--no-leader-election"]),
            "--admin-address", "127.0.0.1", "--admin-port", "0",
            "--discovery-address", "127.0.0.1", "--discovery-port", str(port),
            "--ingress-http-port", str(self.ports.ingress_http),
            "--ingress-https-port", str(self.ports.ingress_https),
            listening="discovery listening",
        )  # fmt: skip
        if int(line["port"]) not in self.discovery_ports:
            self.discovery_ports.append(int(line["port"]))
        return int(line["port"])

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
            listening="admin server listening",
        )  # fmt: skip
        return self.processes[name]

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

    def _proxy_credentials(self) -> tuple[Path, Path]:
        """The files a kubelet would mount: a projected token and the trust bundle."""
        with self.client() as client:
            core: Any = kubernetes.client.CoreV1Api(client)
            request = {"spec": {"audiences": [AUDIENCE], "expirationSeconds": 86400}}
            answer = core.create_namespaced_service_account_token(
                PROXY_ACCOUNT[1], PROXY_ACCOUNT[0], request
            )
            bundle = _wait_for_bundle(core)
        token_path = self.workdir / "token"
        token_path.write_text(answer.status.token)
        bundle_path = self.workdir / "ca.crt"
        bundle_path.write_text(bundle)
        return token_path, bundle_path


def _create_absent(create: Any, body: dict[str, Any]) -> None:
    try:
        create(body)
    except kubernetes.client.exceptions.ApiException as err:
        if err.status != 409:
            raise


def _wait_for_bundle(core: Any) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            config_map = core.read_namespaced_config_map(TRUST_CONFIGMAP[1], TRUST_CONFIGMAP[0])
            if (config_map.data or {}).get("ca.crt"):
                return str(config_map.data["ca.crt"])
        except kubernetes.client.exceptions.ApiException as err:
            if err.status != 404:
                raise
        if time.monotonic() > deadline:
            raise ProcessError("the identity service never published the trust bundle")
        time.sleep(0.1)


def _shared_proxy_service() -> dict[str, Any]:
    return {
        "metadata": {
            "name": PROXY_ACCOUNT[1],
            "labels": {"app.kubernetes.io/name": "coxswain-proxy"},
        },
        "spec": {"ports": [{"name": "admin", "port": 9092, "protocol": "TCP"}]},
    }


def _shared_proxy_slice() -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{PROXY_ACCOUNT[1]}-local",
            "labels": {"kubernetes.io/service-name": PROXY_ACCOUNT[1]},
        },
        "addressType": "IPv4",
        "ports": [{"name": "admin", "port": 9092, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
    }


def _endpoint_slice(echo: EchoBackend) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{echo.service}-local",
            "labels": {"kubernetes.io/service-name": echo.service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": echo.port, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": ["127.0.0.1"],
                "conditions": {"ready": True},
                "targetRef": {
                    "kind": "Pod",
                    "name": f"{echo.service}-0",
                    "namespace": echo.namespace,
                },
            }
        ],
    }


def tls_secret(
    namespace: str, name: str, ca: CertificateAuthority, hosts: Sequence[str]
) -> dict[str, Any]:
    """A kubernetes.io/tls Secret for `hosts`, signed by `ca` (so clients can trust it)."""
    issued = ca.issue(dns=list(hosts))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": base64.b64encode(issued.chain_pem).decode(),
            "tls.key": base64.b64encode(issued.key_pem).decode(),
        },
    }
