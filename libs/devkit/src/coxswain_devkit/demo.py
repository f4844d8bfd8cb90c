"""The local demo: the whole Coxswain stack on this machine, no cluster needed.

`./pants run :demo` lands here. It starts, each as its own process: the Kubernetes API emulator
seeded from `deploy/examples/demo/`, one echo backend per Service there, the identity service,
the controller and one shared proxy, which bootstraps its SVID and streams its routing over
mTLS exactly as in production. It generates the Gateway's TLS certificate, waits for the Gateway
to be Programmed, then prints the kubeconfig and commands to try. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from coxswain_devkit.pki import CertificateAuthority
from coxswain_devkit.processes import ProcessError
from coxswain_devkit.stack import Launcher, Stack, StackPorts, tls_secret

GATEWAY = ("demo", "demo")
HOSTS = ("*.demo.example",)
PROGRAMMED_TIMEOUT = 60.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coxswain-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--port-offset", type=int, default=0, help="add this to the Ingress ports")
    parser.add_argument("--manifests", type=Path, default=Path("deploy/examples/demo"))
    return parser


def _services(manifests: Path) -> list[tuple[str, str]]:
    services = []
    for path in sorted(manifests.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "Service":
                services.append((doc["metadata"]["namespace"], doc["metadata"]["name"]))
    return services


def _gateway(client: Any) -> dict[str, Any]:
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    return dict(
        custom.get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", GATEWAY[0], "gateways", GATEWAY[1]
        )
    )


def _programmed(gateway: dict[str, Any]) -> dict[str, Any] | None:
    for condition in (gateway.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Programmed":
            return dict(condition)
    return None


def _wait_programmed(client: Any) -> dict[str, Any]:
    deadline = time.monotonic() + PROGRAMMED_TIMEOUT
    while True:
        gateway = _gateway(client)
        condition = _programmed(gateway)
        if (condition and condition["status"] == "True") or time.monotonic() > deadline:
            return gateway
        time.sleep(0.2)


def _print_ready(
    stack: Stack, gateway: dict[str, Any], ports: dict[str, int], ca_file: Path
) -> None:
    http, https = ports.get("http"), ports.get("https")
    kube = f"kubectl --kubeconfig {stack.kubeconfig}"
    print(f"""
Coxswain demo running (API emulator at {stack.api_url}).

  kubeconfig: {stack.kubeconfig}
  {kube} get gateways,httproutes,ingresses -A
  {kube} get gateway -n demo demo -o yaml

Gateway demo/demo serves HTTP on 127.0.0.1:{http} and HTTPS on 127.0.0.1:{https}:
  curl -s -H 'Host: app.demo.example' http://127.0.0.1:{http}/v1              # path split: v1
  curl -s -H 'Host: app.demo.example' http://127.0.0.1:{http}/v2              # path split: v2
  curl -s -H 'Host: app.demo.example' -H 'X-Canary: on' http://127.0.0.1:{http}/   # header match
  for i in $(seq 10); do curl -s -H 'Host: split.demo.example' http://127.0.0.1:{http}/ \\
      | grep -o '"pod": *"[^"]*"'; done                                   # weighted 80/20
  curl -si -H 'Host: old.demo.example' http://127.0.0.1:{http}/               # redirect
  curl -s --cacert {ca_file} --resolve app.demo.example:{https}:127.0.0.1 https://app.demo.example:{https}/v1
Ingress demo/legacy on the shared Ingress port:
  curl -s -H 'Host: legacy.demo.example' http://127.0.0.1:{stack.ports.ingress_http}/
""")
    condition = _programmed(gateway) or {}
    print(
        f"Gateway demo/demo: Programmed={condition.get('status')} "
        f"({condition.get('reason')}: {condition.get('message')})"
    )
    for listener in (gateway.get("status") or {}).get("listeners") or []:
        states = ", ".join(f"{c['type']}={c['status']}" for c in listener["conditions"])
        print(
            f"  listener {listener['name']}: attachedRoutes={listener['attachedRoutes']} {states}"
        )
    print("\nPress Ctrl-C to stop every process.\n", flush=True)


def run(offset: int, manifests: Path) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="coxswain-demo-") as tmp:
        workdir = Path(tmp)
        ca = CertificateAuthority.create("coxswain demo CA", days=30)
        ca_file = workdir / "demo-ca.crt"
        ca_file.write_bytes(ca.certificate_pem)
        stack = Stack(
            Launcher.modules(),
            workdir,
            manifests=manifests,
            echo_services=_services(manifests),
            ports=StackPorts(18080 + offset, 18443 + offset),
            extra_objects=[tls_secret("demo", "demo-tls", ca, HOSTS)],
        )
        try:
            stack.start()
            with stack.client() as client:
                gateway = _wait_programmed(client)
            _print_ready(stack, gateway, stack.bind_ports(*GATEWAY), ca_file)
            stop.wait()
        except ProcessError as err:
            print(f"demo: a service failed: {err}", file=sys.stderr)
            return 1
        finally:
            for role, status in stack.stop().items():
                print(f"demo: {role} stopped (exit status {status})")
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    sys.exit(run(args.port_offset, args.manifests))
