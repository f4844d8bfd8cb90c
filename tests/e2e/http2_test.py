"""End to end: HTTP/2 from real clients through the whole stack, and gRPC through a GRPCRoute.

One stack from the shipped PEX files (API emulator, load balancer, identity, controller, shared
proxy, each its own OS process), one Gateway with an HTTP and an HTTPS listener. An HTTPRoute
sends `web.example` to the stack's HTTP/1.1 echo; a GRPCRoute sends the conformance echo's
`GrpcEcho/Echo` (with a RequestHeaderModifier) and `GrpcEcho/EchoTwo` to the devkit echo's gRPC
port, run here as its own process from the devkit PEX. Covers: `curl --http2` over HTTPS
negotiating h2 by ALPN, `curl --http2-prior-knowledge` on the cleartext port (h2c), `h2load`
(many connections and concurrent streams) on both, each answered by the HTTP/1.1 backend the
HTTPRoute names; a grpcio client's unary calls through the GRPCRoute, by h2c and over TLS,
answered by the backend with the method, the route's added metadata, the authority and the pod;
a method no rule matches answered by the proxy itself as UNIMPLEMENTED; the GRPCRoute's status.

`h2load` is Debian's `nghttp2-client`: installed with apt-get when it is missing (the tests run
as root), and a failure to install it fails the test, never skips it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import kubernetes
import pytest

from coxswain_devkit.echo import grpc_messages as pb
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ServiceProcess
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret
from coxswain_devkit.waiting import until

WAIT = 60.0
GROUP = "gateway.networking.k8s.io"
NS = "e2e-h2"
PLURALS = {
    "GatewayClass": "gatewayclasses",
    "Gateway": "gateways",
    "HTTPRoute": "httproutes",
    "GRPCRoute": "grpcroutes",
}
HOSTS = ["web.example", "grpc.example"]


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(
        predicate,
        what,
        within=timeout,
        tolerate=(OSError, http.client.HTTPException, grpc.RpcError),
    )


# ------------------------------------------------------------------------------ tools


def _apt_install(package: str, binary: str) -> str:
    """`binary`, from Debian's `package` installed now if it is missing (the tests run as root)."""
    found = shutil.which(binary)
    if found is not None:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"
    apt = shutil.which("apt-get", path=env["PATH"])
    if apt is None:
        pytest.fail(f"no {binary} and no apt-get to install {package} with")
    for argv in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", package]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    found = shutil.which(binary, path=env["PATH"])
    if found is None:
        pytest.fail(f"apt-get installed {package}, but there is no {binary}")
    return found


@pytest.fixture(scope="module")
def h2load() -> str:
    return _apt_install("nghttp2-client", "h2load")


@pytest.fixture(scope="module")
def curl() -> str:
    path = _apt_install("curl", "curl")
    features = subprocess.run([path, "--version"], capture_output=True, text=True, check=True)
    if "HTTP2" not in features.stdout:
        pytest.fail(f"this curl has no HTTP/2:\n{features.stdout}")
    return path


# ------------------------------------------------------------------------------ objects


def gateway_api(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


LISTENERS = [
    {"name": "http", "port": 80, "protocol": "HTTP"},
    {"name": "https", "port": 443, "protocol": "HTTPS",
     "tls": {"certificateRefs": [{"name": "h2-cert"}]}},
]  # fmt: skip


def http_route() -> dict[str, Any]:
    rules = [{"backendRefs": [{"name": "one", "port": 80}]}]
    return gateway_api(
        "HTTPRoute",
        "web",
        {"parentRefs": [{"name": "gw"}], "hostnames": [HOSTS[0]], "rules": rules},
    )


def grpc_route() -> dict[str, Any]:
    backend = [{"name": "grpc", "port": 80}]
    added = {"type": "RequestHeaderModifier",
             "requestHeaderModifier": {"set": [{"name": "x-route", "value": "echo"}]}}  # fmt: skip

    def method(name: str) -> list[dict[str, Any]]:
        return [{"method": {"type": "Exact", "service": pb.SERVICE, "method": name}}]

    rules = [
        {"matches": method("Echo"), "filters": [added], "backendRefs": backend},
        {"matches": method("EchoTwo"), "backendRefs": backend},
    ]
    return gateway_api(
        "GRPCRoute",
        "echo",
        {"parentRefs": [{"name": "gw"}], "hostnames": [HOSTS[1]], "rules": rules},
    )


def grpc_backend(port: int) -> list[dict[str, Any]]:
    """The Service "grpc" and the EndpointSlice naming the gRPC echo on 127.0.0.1:`port`."""
    named = {"name": "grpc", "port": 80, "protocol": "TCP"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "grpc", "namespace": NS},
            "spec": {"ports": [named]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "grpc-local",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": "grpc"},
            },
            "addressType": "IPv4",
            "ports": [{**named, "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        },
    ]


class Cluster:
    def __init__(self, stack: Stack, ca: CertificateAuthority, workdir: Path) -> None:
        self.stack = stack
        self.ca = ca
        self.ca_file = workdir / "ca.pem"
        self.ca_file.write_bytes(ca.certificate_pem)
        self.client = stack.client()
        self.custom: Any = kubernetes.client.CustomObjectsApi(self.client)

    def create(self, *objects: dict[str, Any]) -> None:
        create: Any = kubernetes.utils.create_from_dict  # core kinds; it knows no CRDs
        for obj in objects:
            if not obj["apiVersion"].startswith(f"{GROUP}/"):
                create(self.client, obj)
            elif obj["kind"] == "GatewayClass":
                self.custom.create_cluster_custom_object(GROUP, "v1", PLURALS[obj["kind"]], obj)
            else:
                plural = PLURALS[obj["kind"]]
                self.custom.create_namespaced_custom_object(GROUP, "v1", NS, plural, obj)

    def conditions(self, kind: str, name: str) -> dict[str, str]:
        route = self.custom.get_namespaced_custom_object(GROUP, "v1", NS, PLURALS[kind], name)
        parents = (route.get("status") or {}).get("parents") or [{}]
        return {c["type"]: c["status"] for c in parents[0].get("conditions") or []}

    def ports(self) -> dict[str, int]:
        return dict(eventually(lambda: self.stack.bind_ports(NS, "gw"), "the bind ports"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("h2")
    ca = CertificateAuthority.create("e2e h2 CA")
    launcher = Launcher.pex_files(Path("."))
    stack = Stack(
        launcher,
        workdir,
        ports=StackPorts.free(),
        echo_services=[(NS, "one")],
        extra_objects=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}],
    )
    echo = ServiceProcess(
        launcher.argv("devkit", "echo", "--address", "127.0.0.1", "--port", "0",
                      "--grpc-port", "0", "--namespace", NS, "--pod", "grpc-0")
    )  # fmt: skip
    try:
        echo.start()
        grpc_port = int(echo.wait_for_msg("grpc echo listening", timeout=WAIT)["port"])
        stack.start()
        running = Cluster(stack, ca, workdir)
        running.create(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": "coxswain"},
                "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "one", "namespace": NS},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            },
            *grpc_backend(grpc_port),
            tls_secret(NS, "h2-cert", ca, HOSTS),
            gateway_api("Gateway", "gw", {"gatewayClassName": "coxswain", "listeners": LISTENERS}),
            http_route(),
            grpc_route(),
        )
        yield running
        running.client.close()
    finally:
        statuses = stack.stop()
        echo_status = echo.stop()
    assert all(code == 0 for code in statuses.values()), statuses
    assert echo_status == 0, echo.log_text()


# ------------------------------------------------------------------------------ curl, h2load


def _curl(curl: str, *args: str) -> tuple[str, dict[str, Any]]:
    """curl's `%{http_version}` and the JSON body it got (a non-200 is an error)."""
    done = subprocess.run(
        [curl, "-sS", "--fail", "--max-time", "10", "-w", "\n%{http_version}", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise OSError(f"curl {args} failed ({done.returncode}): {done.stderr}")
    body, _, version = done.stdout.rpartition("\n")
    return version, json.loads(body)


def test_curl_http2_over_https_negotiates_h2(cluster: Cluster, curl: str) -> None:
    port = cluster.ports()["https"]
    url = f"https://web.example:{port}/tls/path?q=1"
    args = (
        "--http2",
        "--cacert",
        str(cluster.ca_file),
        "--resolve",
        f"web.example:{port}:127.0.0.1",
    )
    version, seen = eventually(lambda: _curl(curl, *args, url), "curl --http2 over HTTPS")
    assert version == "2"  # ALPN chose h2
    assert (seen["pod"], seen["path"], seen["protocol"]) == ("one-0", "/tls/path?q=1", "HTTP/1.1")
    assert seen["headers"]["X-Forwarded-Proto"] == ["https"]


def test_curl_http2_prior_knowledge_on_the_cleartext_port(cluster: Cluster, curl: str) -> None:
    port = cluster.ports()["http"]
    url = f"http://web.example:{port}/h2c"
    args = ("--http2-prior-knowledge", "--resolve", f"web.example:{port}:127.0.0.1")
    version, seen = eventually(lambda: _curl(curl, *args, url), "curl --http2-prior-knowledge")
    assert version == "2"
    assert (seen["pod"], seen["path"], seen["host"]) == ("one-0", "/h2c", f"web.example:{port}")
    assert seen["headers"]["X-Forwarded-Proto"] == ["http"]


_DONE = re.compile(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded")
_CODES = re.compile(r"status codes: (\d+) 2xx")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_h2load_many_streams_all_succeed(cluster: Cluster, h2load: str, scheme: str) -> None:
    port = cluster.ports()[scheme]
    # Reachable first (the route may still be on its way to the proxy).
    eventually(lambda: _status_h2load(h2load, scheme, port, 1) == (1, 1), f"h2load {scheme}")
    assert _status_h2load(h2load, scheme, port, 2000) == (2000, 2000)


def _status_h2load(h2load: str, scheme: str, port: int, requests: int) -> tuple[int, int]:
    """(done, answered 2xx) of `requests` GETs on 8 connections x 10 streams; h2 only."""
    argv = [h2load, "-n", str(requests), "-c", str(min(8, requests)), "-m", "10",
            "--npn-list=h2", f"--connect-to=127.0.0.1:{port}", "-H", "x-load: h2load",
            f"{scheme}://web.example:{port}/load"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    counts, codes = _DONE.search(done.stdout), _CODES.search(done.stdout)
    if counts is None or codes is None:
        raise AssertionError(f"h2load said:\n{done.stdout}\n{done.stderr}")
    if scheme == "https":
        assert "Application protocol: h2" in done.stdout, done.stdout
    total, finished, succeeded = map(int, counts.groups())
    assert total == requests and succeeded == finished
    return finished, int(codes[1])


# ------------------------------------------------------------------------------ gRPC


def _call(channel: grpc.Channel, method: str, **kwargs: Any) -> pb.Assertions:
    call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    reply = call(b"", timeout=10, **kwargs)
    return pb.EchoResponse.decode(reply).assertions


def _grpc_over_h2c(port: int) -> grpc.Channel:
    options = (("grpc.default_authority", HOSTS[1]),)
    return grpc.insecure_channel(f"127.0.0.1:{port}", options)


def test_grpc_unary_through_a_grpcroute(cluster: Cluster) -> None:
    port = cluster.ports()["http"]
    with _grpc_over_h2c(port) as channel:
        seen = eventually(lambda: _call(channel, pb.ECHO, metadata=(("x-test", "1"),)), "gRPC")
        assert seen.fully_qualified_method == pb.ECHO
        assert seen.context is not None
        assert (seen.context.namespace, seen.context.pod) == (NS, "grpc-0")
        assert seen.authority == HOSTS[1]
        assert seen.metadata("x-test") == ["1"]
        assert seen.metadata("x-route") == ["echo"]  # the rule's RequestHeaderModifier
        two = _call(channel, pb.ECHO_TWO)
        assert two.fully_qualified_method == pb.ECHO_TWO and two.metadata("x-route") == []
        with pytest.raises(grpc.RpcError) as failed:
            _call(channel, pb.ECHO_THREE)  # no rule matches: the proxy answers, not the backend
    error: Any = failed.value
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "404" in error.details()
    conditions = cluster.conditions("GRPCRoute", "echo")
    assert (conditions["Accepted"], conditions["ResolvedRefs"]) == ("True", "True")


def test_grpc_over_tls_through_the_https_listener(cluster: Cluster) -> None:
    port = cluster.ports()["https"]
    credentials = grpc.ssl_channel_credentials(root_certificates=cluster.ca.certificate_pem)
    options = (("grpc.ssl_target_name_override", HOSTS[1]), ("grpc.default_authority", HOSTS[1]))
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options) as channel:
        seen = eventually(lambda: _call(channel, pb.ECHO), "gRPC over TLS")
    assert seen.fully_qualified_method == pb.ECHO
    assert seen.authority == HOSTS[1] and seen.metadata("x-route") == ["echo"]
    assert seen.tls_assertions is None  # TLS ends at the proxy: the backend is h2c
