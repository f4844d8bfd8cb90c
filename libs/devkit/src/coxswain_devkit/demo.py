"""The local demo: the whole Coxswain stack on this machine, no cluster needed.

`./pants run :demo` lands here. It starts, each as its own process (`stack.Stack`): the
Kubernetes API emulator seeded from `deploy/examples/demo/`, the devkit load balancer and node
agent, one echo backend per Service there, the identity service, the controller and one shared
proxy, which bootstraps its SVID and streams its routing over mTLS exactly as in production. The
manifests declare three Gateways: `demo` and `staging` share a hostname and a port and are
told apart by their addresses, and `dedicated` names CoxswainGatewayParameters, so the
controller provisions its own proxy, which the node agent runs. A GRPCRoute on `demo` sends
the conformance echo's gRPC service to echo-grpc, whose echo serves gRPC too (a Service with a
port named grpc), and a set of Ingresses written for ingress-nginx is served by its
annotations on the shared proxy's Ingress port. The demo generates demo's TLS certificate,
starts the operator UI (on 127.0.0.1:18090 plus the port offset, reading the controller's API
with its own ServiceAccount token), waits for every Gateway to be Programmed, then prints the
UI's URL, the kubeconfig and commands to try, each Gateway at its own address (`demo_text`);
the gRPC one runs `coxswain-devkit grpc-call` through a script in the demo's directory, so it
uses the demo's own interpreter. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from coxswain_devkit import demo_text
from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ProcessError
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret

NAMESPACE = "demo"
HOSTS = ("*.demo.example",)
PROGRAMMED_TIMEOUT = 90.0
UI_PORT = 18090


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--port-offset", type=int, default=0, help="add this to the Ingress ports")
    parser.add_argument("--manifests", type=Path, default=Path("deploy/examples/demo"))
    return parser


def _documents(manifests: Path) -> list[dict[str, Any]]:
    documents = []
    for path in sorted(manifests.glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return documents


def _services(documents: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (doc["metadata"]["namespace"], doc["metadata"]["name"])
        for doc in documents
        if doc.get("kind") == "Service"
    ]


def _grpc_services(documents: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The Services with a port named grpc: their echo serves the gRPC echo there too."""
    return [
        (doc["metadata"]["namespace"], doc["metadata"]["name"])
        for doc in documents
        if doc.get("kind") == "Service"
        and any(p.get("name") == "grpc" for p in doc.get("spec", {}).get("ports") or [])
    ]


def _gateways(documents: list[dict[str, Any]]) -> list[str]:
    return [doc["metadata"]["name"] for doc in documents if doc.get("kind") == "Gateway"]


def _wait_served(stack: Stack, names: list[str]) -> list[demo_text.Served]:
    """Each Gateway once it is Programmed and every listener has an address (or the timeout)."""
    deadline = time.monotonic() + PROGRAMMED_TIMEOUT
    with stack.client() as client:
        while True:
            served = [demo_text.served(stack, client, NAMESPACE, name) for name in names]
            done = all(s.programmed_status == "True" and s.reachable for s in served)
            if done or time.monotonic() > deadline:
                return served
            time.sleep(0.2)


def _grpc_caller(launcher: Launcher, workdir: Path) -> Path:
    """A script running `coxswain-devkit grpc-call` as the demo runs the devkit: the same
    interpreter and, when the demo runs from source, the same PYTHONPATH."""
    script = workdir / "grpc-call"
    lines = [
        "#!/bin/sh",
        "# One call of the devkit echo's gRPC service (coxswain-devkit grpc-call).",
    ]
    # Made absolute: the operator runs the script from wherever they are.
    found = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if found:
        absolute = os.pathsep.join(str(Path(p).resolve()) for p in found)
        lines.append(f"export PYTHONPATH={shlex.quote(absolute)}")
    lines.append(f'exec {shlex.join(launcher.argv("devkit", "grpc-call"))} "$@"')
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def start(
    launcher: Launcher, workdir: Path, manifests: Path, *, ports: StackPorts, ui_port: int
) -> tuple[Stack, str]:
    """The demo's stack started, every Gateway served (or the timeout), and the text to print.
    The caller stops the stack; it is stopped here only when starting fails."""
    documents = _documents(manifests)
    ca = CertificateAuthority.create("coxswain demo CA", days=30)
    ca_file = workdir / "demo-ca.crt"
    ca_file.write_bytes(ca.certificate_pem)
    stack = Stack(
        launcher,
        workdir,
        manifests=manifests,
        echo_services=_services(documents),
        grpc_echoes=_grpc_services(documents),
        ports=ports,
        extra_objects=[tls_secret(NAMESPACE, "demo-tls", ca, HOSTS)],
    )
    try:
        stack.start()
        ui_url = stack.start_ui(port=ui_port)
        served = _wait_served(stack, _gateways(documents))
        with stack.client() as client:
            pods = demo_text.pods(client)
        caller = _grpc_caller(launcher, workdir)
        return stack, demo_text.ready(stack, served, pods, ca_file, ui_url, caller)
    except BaseException:
        stack.stop()
        raise


def run(offset: int, manifests: Path) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="coxswain-demo-") as tmp:
        ports = StackPorts(18080 + offset, 18443 + offset)
        try:
            stack, text = start(
                Launcher.modules(), Path(tmp), manifests, ports=ports, ui_port=UI_PORT + offset
            )
        except ProcessError as err:
            print(f"demo: a service failed: {err}", file=sys.stderr)
            return 1
        try:
            print(text, flush=True)
            stop.wait()
        finally:
            for role, status in stack.stop().items():
                print(f"demo: {role} stopped (exit status {status})")
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    sys.exit(run(args.port_offset, args.manifests))
