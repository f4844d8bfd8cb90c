"""`coxswain-controller serve` as a real process: the discovery listener speaks mTLS on its port.

Covers the CLI wiring of the discovery listener (CA files, serving certificate, admission) and
clean shutdown with live streams, the provisioning flags (NodePort refused with the reason,
the rest reaching translation's options), and `translate -f --migration-report` over a set of
ingress-nginx Ingresses (fates, and HTTPRoutes that translate). Leaves out the stream protocol
(discovery/server_test.py) and the report's every annotation (translate/ingress tests).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import yaml

from coxswain_controller import cli, runtime
from coxswain_controller.translate import goldens
from coxswain_devkit.pki import CertificateAuthority, spiffe_id
from coxswain_devkit.processes import ServiceProcess
from coxswain_proto import discovery as pb
from coxswain_proto import rpc


def _controller(tmp_path: Path) -> tuple[ServiceProcess, CertificateAuthority]:
    ca = CertificateAuthority.create()
    (tmp_path / "ca.crt").write_bytes(ca.certificate_pem)
    (tmp_path / "ca.key").write_bytes(ca.key_pem)
    argv = [
        sys.executable, "-m", "coxswain_controller", "serve",
        "--admin-address", "127.0.0.1", "--admin-port", "0",
        "--discovery-address", "127.0.0.1", "--discovery-port", "0",
        "--ca-cert-file", str(tmp_path / "ca.crt"), "--ca-key-file", str(tmp_path / "ca.key"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return ServiceProcess(argv, env=env), ca


async def test_discovery_listener_admits_by_identity_and_stops_cleanly(tmp_path: Path) -> None:
    process, ca = _controller(tmp_path)
    with process:
        port = process.wait_for_msg("discovery listening")["port"]
        intruder = ca.issue(uris=[spiffe_id("cluster.local", "default", "someone")])
        creds = grpc.ssl_channel_credentials(
            ca.certificate_pem, intruder.key_pem, intruder.chain_pem
        )
        async with grpc.aio.secure_channel(
            f"127.0.0.1:{port}", creds, options=[("grpc.ssl_target_name_override", "localhost")]
        ) as channel:
            call = rpc.discovery_stream(channel)()
            await call.write(
                pb.ProxyMessage(subscribe=pb.Subscribe(node_id="n", wire_version=rpc.WIRE_VERSION))
            )
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call.read()
        assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert process.stop() == 0


def test_a_nodeport_vip_service_type_is_refused_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli._parser().parse_args(["serve", "--vip-service-type", "NodePort"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "NodePort is refused" in error
    assert "port each listener declares" in error and "30000-32767" in error


def test_provisioning_flags_reach_translation() -> None:
    args = cli._parser().parse_args(
        [
            "serve",
            "--vip-service-type", "ClusterIP",
            "--shared-proxy-selector", "app.kubernetes.io/name=proxy, app.kubernetes.io/instance=c",
            "--proxy-arg=--log-level", "--proxy-arg=debug",
        ]
    )  # fmt: skip
    options = runtime._options(args)
    assert options.vip_service_type == "ClusterIP"
    assert options.shared_proxy_selector == (
        ("app.kubernetes.io/name", "proxy"),
        ("app.kubernetes.io/instance", "c"),
    )
    assert options.proxy_args == ("--log-level", "debug")
    assert options.proxy_image.startswith("ghcr.io/coxswain-labs/coxswain-proxy:")


@pytest.mark.parametrize("selector", ["app", "=x", "app=", "a b=c", "app=x y"])
def test_a_selector_that_is_not_labels_is_refused(selector: str) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["serve", "--shared-proxy-selector", selector])


# ---------------------------------------------------------------------------------------------
# translate -f --migration-report

NGINX_MANIFESTS = """
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec: {ports: [{name: http, port: 8080}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: api
  namespace: shop
  creationTimestamp: '2026-01-01T00:00:01Z'
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /$2
    nginx.ingress.kubernetes.io/enable-cors: "true"
    nginx.ingress.kubernetes.io/proxy-read-timeout: "90"
    nginx.ingress.kubernetes.io/proxy-buffering: "off"
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /api(/|$)(.*), pathType: ImplementationSpecific,
         backend: {service: {name: api, port: {number: 8080}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  creationTimestamp: '2026-01-01T00:00:00Z'
  annotations:
    nginx.ingress.kubernetes.io/upstream-vhost: web.internal
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web-canary
  namespace: shop
  creationTimestamp: '2026-01-01T00:00:02Z'
  annotations:
    nginx.ingress.kubernetes.io/canary: "true"
    nginx.ingress.kubernetes.io/canary-weight: "10"
spec:
  ingressClassName: nginx
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 8080}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: legacy
  namespace: shop
  annotations:
    nginx.ingress.kubernetes.io/configuration-snippet: 'more_set_headers "X-Legacy: 1";'
    nginx.ingress.kubernetes.io/limit-rate: "100"
spec:
  ingressClassName: nginx
  rules:
  - host: legacy.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
"""


def _report(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    manifests = tmp_path / "ingresses.yaml"
    manifests.write_text(NGINX_MANIFESTS)
    with pytest.raises(SystemExit) as exited:
        cli.main(["translate", "-f", str(manifests), "--migration-report", *extra])
    assert exited.value.code == 0
    return {d["ingress"]: d for d in yaml.safe_load_all(capsys.readouterr().out)}


def test_the_migration_report_gives_each_annotation_its_fate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _report(tmp_path, capsys)
    assert sorted(entries) == ["shop/api", "shop/legacy", "shop/web", "shop/web-canary"]
    api = entries["shop/api"]
    assert api["served"] is True and "not Coxswain's" in api["ingressClass"]
    fates = {a["key"].rsplit("/", 1)[1]: a["fate"] for a in api["annotations"]}
    assert fates == {
        "enable-cors": "honoured",
        "proxy-buffering": "ignored",
        "proxy-read-timeout": "honoured",
        "rewrite-target": "honoured",
    }
    assert any("no Gateway API filter" in n for n in api["notes"])
    legacy = entries["shop/legacy"]
    assert legacy["served"] is False and "httpRoutes" not in legacy
    why = {a["key"].rsplit("/", 1)[1]: a["note"] for a in legacy["annotations"]}
    assert "never run" in why["configuration-snippet"]
    assert "not supported yet" in why["limit-rate"]
    assert any("main Ingress" in n for n in entries["shop/web-canary"]["notes"])


def test_the_reported_httproutes_translate_to_what_the_ingresses_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = _report(tmp_path, capsys, "--report-gateway", "infra/public")
    routes = [r for e in entries.values() for r in e.get("httpRoutes", [])]
    assert {r["metadata"]["name"] for r in routes} == {"api", "web"}
    [web] = [r for r in routes if r["metadata"]["name"] == "web"]
    assert web["spec"]["parentRefs"] == [{"name": "public", "namespace": "infra"}]
    [rule] = web["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"name": "web", "port": 80, "weight": 90},
        {"name": "api", "port": 8080, "weight": 10},
    ]
    assert rule["filters"] == [{"type": "URLRewrite", "urlRewrite": {"hostname": "web.internal"}}]
    # Applied beside a Gateway, they are accepted and compiled.
    gateway = [
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
         "metadata": {"name": "coxswain"},
         "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"}},
        {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
         "metadata": {"name": "public", "namespace": "infra"},
         "spec": {"gatewayClassName": "coxswain", "listeners": [
             {"name": "http", "port": 80, "protocol": "HTTP",
              "allowedRoutes": {"namespaces": {"from": "All"}}}]}},
    ]  # fmt: skip
    services = [d for d in yaml.safe_load_all(NGINX_MANIFESTS) if d["kind"] == "Service"]
    rendered = yaml.safe_load(goldens.render_manifests([*gateway, *services, *routes]))
    accepted = {
        s["object"]: c["status"]
        for s in rendered["status"]
        for parent in s["status"].get("parents", [])
        for c in parent["conditions"]
        if c["type"] == "Accepted"
    }
    assert accepted == {"HTTPRoute shop/api": "True", "HTTPRoute shop/web": "True"}
