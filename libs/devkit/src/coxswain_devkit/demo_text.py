"""What the demo prints once every Gateway is served: where each one answers, and how to look.

Read from the cluster, not assumed: each Gateway's address is its own Service's load balancer
address (with the devkit load balancer's port offset where it could not bind a port below 1024,
`Stack.address`), the ports behind it are the Service's targetPorts (the shared proxy's bind
ports) or its endpoints (a dedicated Gateway's pods), and the log commands name the Pods that
exist: the stack's processes on node `devkit-stack`, the dedicated proxies on `devkit-node`.
The commands for deploy/examples/demo's ingress-nginx Ingresses and its GRPCRoute name the
hosts those manifests declare; the gRPC call goes through the script the demo wrote
(`demo._grpc_caller`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from coxswain_devkit.stack import GATEWAY_GROUP, GATEWAY_LABEL, Stack

__all__ = ["Served", "pods", "ready", "served"]

HOST = "app.demo.example"
GRPC_HOST = "grpc.demo.example"  # deploy/examples/demo/21-grpcroute.yaml
NGINX = "nginx.demo.example"  # the hosts of deploy/examples/demo/50-ingress-nginx.yaml are under it
CANARY = " -H 'X-Canary: on'"
# Which echo backend answers `HOST` on each Gateway of deploy/examples/demo/.
ANSWERS = {"demo": "echo-v1", "staging": "echo-staging", "dedicated": "echo-dedicated"}
WHAT = {
    "devkit-apiserver": "the Kubernetes API emulator",
    "devkit-lb": "the load balancer",
    "devkit-node": "the node agent",
    "coxswain-identity": "the identity service",
    "coxswain-controller": "the controller",
    "coxswain-proxy": "the shared proxy",
    "coxswain-ui": "the operator UI",
}


@dataclass
class Listener:
    name: str  # the listener's name
    protocol: str  # HTTP, HTTPS, ...
    port: int  # the port it declares
    at: tuple[str, int] | None  # where it answers on this machine (None: no address yet)
    behind: str  # what the Service sends it to: a bind port, or the dedicated pods


@dataclass
class Served:
    name: str  # the Gateway's name
    dedicated: bool  # whether it names parameters (its own proxies)
    programmed_status: str  # Programmed's status: "True", "False", "" (none yet)
    programmed_reason: str  # and its reason and message
    programmed_message: str
    listeners: list[Listener] = field(default_factory=list)

    @property
    def reachable(self) -> bool:
        return all(listener.at is not None for listener in self.listeners)

    @property
    def address(self) -> str:
        found = {listener.at[0] for listener in self.listeners if listener.at is not None}
        return ", ".join(sorted(found)) or "(no address yet)"


def _json(response: Any) -> dict[str, Any]:
    return dict(json.loads(response.data))


def served(stack: Stack, client: Any, namespace: str, name: str) -> Served:
    custom: Any = kubernetes.client.CustomObjectsApi(client)
    gateway = custom.get_namespaced_custom_object(GATEWAY_GROUP, "v1", namespace, "gateways", name)
    conditions = (gateway.get("status") or {}).get("conditions") or []
    programmed: dict[str, Any] = next((c for c in conditions if c["type"] == "Programmed"), {})
    infrastructure = gateway["spec"].get("infrastructure") or {}
    result = Served(
        name,
        "parametersRef" in infrastructure,
        str(programmed.get("status", "")),
        str(programmed.get("reason", "")),
        str(programmed.get("message", "")),
    )
    service = _service(client, namespace, name)
    endpoints = _endpoints(client, namespace, service) if service else []
    for declared in gateway["spec"]["listeners"]:
        port = int(declared["port"])
        behind = _behind(service, port, endpoints, result.dedicated)
        at = stack.address(namespace, name, port)
        result.listeners.append(Listener(declared["name"], declared["protocol"], port, at, behind))
    return result


def _service(client: Any, namespace: str, gateway: str) -> dict[str, Any] | None:
    core: Any = kubernetes.client.CoreV1Api(client)
    found = core.list_namespaced_service(
        namespace, label_selector=f"{GATEWAY_LABEL}={gateway}", _preload_content=False
    )
    items = _json(found)["items"]
    return dict(items[0]) if items else None


def _endpoints(client: Any, namespace: str, service: dict[str, Any]) -> list[str]:
    discovery: Any = kubernetes.client.DiscoveryV1Api(client)
    selector = f"kubernetes.io/service-name={service['metadata']['name']}"
    found = discovery.list_namespaced_endpoint_slice(
        namespace, label_selector=selector, _preload_content=False
    )
    return sorted(
        {
            str(address)
            for piece in _json(found)["items"]
            for endpoint in piece.get("endpoints") or []
            for address in endpoint.get("addresses") or []
        }
    )


def _behind(service: dict[str, Any] | None, port: int, pods: list[str], dedicated: bool) -> str:
    if service is None:
        return "no Service yet"
    for declared in service["spec"].get("ports") or []:
        if int(declared["port"]) == port:
            target = declared.get("targetPort", port)
            if dedicated:
                return "its own proxy at " + ", ".join(f"{ip}:{target}" for ip in pods)
            return f"the shared proxy's bind port {target}"
    return "not on its Service yet"


@dataclass(frozen=True)
class PodLine:
    namespace: str
    name: str
    node: str
    deployment: str  # the owning Deployment's name, if any


def pods(client: Any) -> list[PodLine]:
    core: Any = kubernetes.client.CoreV1Api(client)
    found = _json(core.list_pod_for_all_namespaces(_preload_content=False))["items"]
    lines = []
    for pod in found:
        meta = pod["metadata"]
        owners = [o["name"] for o in meta.get("ownerReferences") or [] if o["kind"] == "Deployment"]
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        lines.append(PodLine(meta["namespace"], meta["name"], node, owners[0] if owners else ""))
    return sorted(lines, key=lambda p: (p.deployment == "", p.namespace != "kube-system", p.name))


# ------------------------------------------------------------------ the text


def ready(
    stack: Stack,
    gateways: list[Served],
    pod_lines: list[PodLine],
    ca_file: Path,
    ui_url: str = "",
    grpc_caller: Path | None = None,
) -> str:
    by_name = {g.name: g for g in gateways}
    parts = [_header(stack), _ui(ui_url), _shared(by_name, ca_file)]
    parts += [_grpc(by_name.get("demo"), grpc_caller, ca_file)]
    parts += [_dedicated(by_name.get("dedicated"))]
    parts += [_ingress(stack), _migrated(stack), _logs(pod_lines), _status(gateways)]
    return "\n".join(p for p in parts if p) + "\nPress Ctrl-C to stop every process.\n"


def _header(stack: Stack) -> str:
    return f"""
Coxswain demo running (API emulator at {stack.api_url}).

Point kubectl at it first (every kubectl command below assumes this):
  export KUBECONFIG={stack.kubeconfig}
  kubectl get gateways,httproutes,ingresses -A
  kubectl get pods,services -A -o wide
"""


def _ui(url: str) -> str:
    if not url:
        return ""
    return (
        f"The operator UI: {url}\n"
        "  fleet, Gateways, routes, problems, events, manifests, logs, and Explain: why a\n"
        "  request goes where it goes. It reads the controller's API with the token of the\n"
        "  ServiceAccount coxswain-system/coxswain-ui, and listens on 127.0.0.1 only.\n"
    )


def _where(gateway: Served) -> str:
    lines = [f"  demo/{gateway.name} at {gateway.address}:"]
    for x in gateway.listeners:
        at = f"port {x.at[1]}" if x.at else "no address yet"
        lines.append(f"    {x.protocol} listener {x.name} (port {x.port}) on {at} -> {x.behind}")
    return "\n".join(lines)


def _curl(gateway: Served, path: str = "/", extra: str = "") -> str:
    http = next((x for x in gateway.listeners if x.protocol == "HTTP" and x.at), None)
    if http is None or http.at is None:
        return f"  # demo/{gateway.name} has no address yet"
    ip, port = http.at
    return f"curl -s http://{ip}:{port}{path} -H 'Host: {HOST}'{extra}"


def _shared(by_name: dict[str, Served], ca_file: Path) -> str:
    demo, staging = by_name.get("demo"), by_name.get("staging")
    if demo is None or staging is None:
        return ""
    lines = [
        f"Two Gateways with one hostname ({HOST}) and one port (80), at two addresses; the shared",
        "proxy serves both, each on bind ports of its own:",
        _where(demo),
        _where(staging),
        f"  {_curl(demo, '/v1')}      # demo/demo: {ANSWERS['demo']}",
        f"  {_curl(staging, '/v1')}      # demo/staging: {ANSWERS['staging']}",
        "demo/demo's routes (deploy/examples/demo/20-routes.yaml):",
        f"  {_curl(demo, '/v2')}      # path split: v2",
        f"  {_curl(demo, '/', CANARY)}   # header match",
        f"  for i in $(seq 10); do {_curl(demo).replace(HOST, 'split.demo.example')} \\",
        '      | grep -o \'"pod": *"[^"]*"\'; done                      # weighted 80/20',
        f"  {_curl(demo).replace('curl -s', 'curl -si').replace(HOST, 'old.demo.example')}"
        "    # redirect",
    ]
    https = next((x for x in demo.listeners if x.protocol == "HTTPS" and x.at), None)
    if https is not None and https.at is not None:
        ip, port = https.at
        lines.append(
            f"  curl -s --cacert {ca_file} --resolve {HOST}:{port}:{ip} https://{HOST}:{port}/v1"
        )
    return "\n".join(lines) + "\n"


def _grpc(gateway: Served | None, caller: Path | None, ca_file: Path) -> str:
    if gateway is None or caller is None:
        return ""
    at = {x.protocol: x.at for x in gateway.listeners if x.at is not None}
    if "HTTP" not in at:
        return ""
    ip, port = at["HTTP"]
    call = f"{caller} {ip}:{port} --authority {GRPC_HOST}"
    lines = [
        f"A GRPCRoute on demo/demo ({GRPC_HOST}: GrpcEcho/Echo to echo-grpc's gRPC port, adding",
        "x-route), called with coxswain-devkit grpc-call (it prints what the backend saw):",
        f"  {call} -H x-user:you      # gRPC over h2c: echo-grpc",
    ]
    if "HTTPS" in at:
        ip, port = at["HTTPS"]
        lines.append(
            f"  {caller} {ip}:{port} --authority {GRPC_HOST} --cacert {ca_file}   # over TLS"
        )
    lines.append(f"  {call} --method EchoTwo      # no rule matches: UNIMPLEMENTED")
    return "\n".join(lines) + "\n"


def _dedicated(gateway: Served | None) -> str:
    if gateway is None:
        return ""
    return (
        "\n".join(
            [
                "A dedicated Gateway: its own proxy, which the controller provisioned (Deployment,",
                "Service, ServiceAccount dedicated-coxswain) and the devkit node agent runs:",
                _where(gateway),
                f"  {_curl(gateway, '/v1')}    # demo/dedicated: {ANSWERS['dedicated']}",
                "  kubectl -n demo get coxswaingatewayparameters",
                f"  kubectl -n demo get deployments,pods,services,serviceaccounts -l "
                f"{GATEWAY_LABEL}=dedicated",
            ]
        )
        + "\n"
    )


def _ingress(stack: Stack) -> str:
    port = stack.ports.ingress_http
    return (
        "Ingress demo/legacy on the shared proxy's Ingress port:\n"
        f"  curl -s http://127.0.0.1:{port}/ -H 'Host: legacy.demo.example'\n"
    )


def _migrated(stack: Stack) -> str:
    base = f"http://127.0.0.1:{stack.ports.ingress_http}"

    def curl(name: str, path: str = "/", *, flags: str = "-s", extra: str = "") -> str:
        return f"curl {flags} {base}{path} -H 'Host: {name}.{NGINX}'{extra}"

    codes = curl("partners", flags="-s -o /dev/null -w '%{http_code} '")
    always = " -H 'X-Canary: always'"
    pods = '| grep -o \'"pod": *"[^"]*"\''
    lines = [
        "Ingresses written for ingress-nginx, served by their annotations as they are",
        "(deploy/examples/demo/50-ingress-nginx.yaml; their IngressClass nginx names Coxswain's",
        "controller):",
        f"  {curl('api', '/api/orders/7')}   # rewrite-target /$2: the path /orders/7",
        f"  {curl('shop', extra=always)}   # canary-by-header",
        f"  for i in $(seq 10); do {curl('shop')} \\",
        f"      {pods}; done                          # canary-weight 20",
        f"  for i in $(seq 7); do {codes}; done; \\",
        f"      {curl('partners', flags='-si')} | grep -i '^retry-after'   # limit-rps 1",
        f"  {curl('internal', flags='-si')} | head -1   # auth-type basic: 401",
        f"  {curl('internal', flags='-s -u demo:demo')}   # and with demo:demo",
        f"  {curl('snippet', flags='-si')} | head -1   # a snippet, refused: 404",
        "  kubectl -n demo describe ingress nginx-snippet   # why: its InvalidAnnotation Event",
    ]
    return "\n".join(lines) + "\n"


def _logs(pod_lines: list[PodLine]) -> str:
    lines = ["Every service's logs (add -f to follow):"]
    deployments = sorted({(p.namespace, p.deployment) for p in pod_lines if p.deployment})
    for namespace, deployment in deployments:
        names = ", ".join(p.name for p in pod_lines if p.deployment == deployment)
        command = f"kubectl logs -n {namespace} deploy/{deployment}"
        lines.append(f"  {command:<52} # its proxy, pod {names}")
    for pod in (p for p in pod_lines if not p.deployment):
        command = f"kubectl logs -n {pod.namespace} {pod.name}"
        lines.append(f"  {command:<52} # {WHAT.get(pod.name, 'an echo backend')}")
    return "\n".join(lines) + "\n"


def _status(gateways: list[Served]) -> str:
    lines = []
    for g in gateways:
        lines.append(
            f"Gateway demo/{g.name}: Programmed={g.programmed_status} "
            f"({g.programmed_reason}: {g.programmed_message})"
        )
    return "\n".join(lines) + "\n"
