"""The operator API over HTTP against a running controller: health, fleet, a proxy's table,
Gateways, problems, events, manifests, explain, logs, and who may read them.

Everything is real: the controller's runtime against the devkit API emulator, its admin server
on 127.0.0.1, a test proxy over mTLS that acks and binds, bearer tokens reviewed by TokenReview.
"""

from __future__ import annotations

import asyncio
from typing import Any

import kubernetes

from coxswain_controller.api.conftest import Running, until
from coxswain_controller.conftest import subscribe
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.waiting import eventually
from coxswain_proto import discovery as pb

WAIT = 15.0


async def _connect(running: Running, node_id: str = "proxy-1") -> tuple[Any, pb.Snapshot]:
    call = running.discovery.open()
    await call.write(subscribe(node_id))
    snapshot = (await asyncio.wait_for(call.read(), WAIT)).snapshot
    return call, snapshot


async def _ack(call: Any, snapshot: pb.Snapshot) -> int:
    """Ack `snapshot` and report its listeners bound; the bind port."""
    await call.write(pb.ProxyMessage(ack=pb.Ack(version=snapshot.version, nonce=snapshot.nonce)))
    listeners = next(r.gateway_listeners for r in snapshot.resources if r.gateway_listeners)
    bound = [pb.BoundPort(port=x.bind_port, protocol=x.protocol) for x in listeners.listeners]
    await call.write(pb.ProxyMessage(node_status=pb.NodeStatus(bound=bound)))
    return int(bound[0].port)


async def test_health_is_open_and_names_every_subsystem(running: Running) -> None:
    status, body = await running.get("/api/v1/health")
    assert status == 200
    assert body["ready"] is True and body["service"] == "controller"
    sub = body["subsystems"]
    assert sub["sources"]["state"] == "synced"
    assert sub["sources"]["kinds"]["HTTPRoute"]["synced"] is True
    assert sub["leadership"] == {"state": "leader", "leader": True}
    assert sub["discovery"]["state"] == "listening"
    assert sub["discovery"]["port"] == running.runtime.discovery_port
    assert sub["translation"]["state"] == "ok" and sub["translation"]["seq"] >= 1
    assert sub["translation"]["durationMs"] >= 0
    assert sub["publish"]["seq"] == running.runtime.registry.seq
    assert sub["publish"]["scopes"] == 1


async def test_guarded_endpoints_want_an_allowed_token(running: Running) -> None:
    viewer = running.token("ops", "viewer")
    stranger = running.token("shop", "stranger")
    for path in (
        "/api/v1/fleet",
        "/api/v1/routing/gateways",
        "/api/v1/problems",
        "/api/v1/manifests/Service/shop/web",
        "/api/v1/explain",
        "/api/v1/pods/shop/web-0/logs",
    ):
        assert (await running.get(path))[0] == 401, path
        assert (await running.get(path, "not-a-token"))[0] == 401, path
        status, body = await running.get(path, stranger)
        assert status == 403, path
        assert "system:serviceaccount:shop:stranger" in body["error"]["message"]
    assert (await running.get("/api/v1/fleet", viewer))[0] == 200


async def test_fleet_shows_each_proxy_its_ack_lag_binds_and_last_nack(running: Running) -> None:
    token = running.token("ops", "viewer")
    call, snapshot = await _connect(running)
    await until(lambda: running.runtime.nodes.get("proxy-1") is not None)
    _, body = await running.get("/api/v1/fleet", token)
    (proxy,) = body["proxies"]
    assert proxy["nodeId"] == "proxy-1"
    assert proxy["identity"] == "ns/coxswain-system/sa/coxswain-proxy"
    assert proxy["scope"] == "SharedPool"
    assert proxy["acked"] == {"version": "", "seq": 0}
    assert proxy["lag"]["upToDate"] is False and proxy["lag"]["seqs"] >= 1
    assert proxy["lastNack"] is None

    bind_port = await _ack(call, snapshot)
    await until(lambda: bool(running.runtime.nodes.get("proxy-1").bound))  # type: ignore[union-attr]
    _, body = await running.get("/api/v1/fleet", token)
    proxy = body["proxies"][0]
    assert proxy["acked"]["version"] == snapshot.version == proxy["current"]["version"]
    assert proxy["lag"] == {"seqs": 0, "ms": 0, "upToDate": True}
    assert proxy["bound"] == [{"port": bind_port, "protocol": "HTTP"}]

    # A second proxy refuses the snapshot: the fleet shows why.
    other, refused = await _connect(running, "proxy-2")
    await other.write(
        pb.ProxyMessage(
            nack=pb.Nack(version=refused.version, nonce=refused.nonce, detail="port 80 in use")
        )
    )
    await until(lambda: running.runtime.nodes.get("proxy-2").last_nack is not None)  # type: ignore[union-attr]
    _, body = await running.get("/api/v1/fleet", token)
    second = body["proxies"][1]
    assert second["nodeId"] == "proxy-2"
    assert (second["lastNack"]["version"], second["lastNack"]["reason"]) == (
        refused.version,
        "port 80 in use",
    )
    assert second["lag"]["upToDate"] is False


async def test_a_proxys_table_is_the_snapshot_it_acked(running: Running) -> None:
    token = running.token("ops", "viewer")
    assert (await running.get("/api/v1/fleet/proxies/nobody/routes", token))[0] == 404
    call, snapshot = await _connect(running)
    bind_port = await _ack(call, snapshot)
    await until(lambda: bool(running.runtime.nodes.get("proxy-1").bound))  # type: ignore[union-attr]
    status, table = await running.get("/api/v1/fleet/proxies/proxy-1/routes", token)
    assert status == 200
    assert table["version"] == snapshot.version
    (port,) = table["ports"]
    assert port["port"] == bind_port
    hosts = {h["host"]: h for h in port["hosts"]}
    rules = {r["route"]["name"]: r for r in hosts["shop.example.com"]["rules"]}
    assert rules["api"]["matches"][0]["method"] == "POST"
    assert rules["api"]["matches"][0]["path"] == {"type": "PathPrefix", "value": "/api"}
    (backend,) = rules["web"]["backends"]
    assert backend["weight"] == 3
    assert backend["endpointsServed"][0]["address"] == "10.0.0.1"
    assert backend["endpointsServed"][0]["port"] == 8080
    broken = hosts["broken.example.com"]["rules"][0]["backends"][0]
    assert broken["endpointsServed"] == [] and broken["unresolvedReason"]


async def test_gateways_problems_and_events(running: Running) -> None:
    token = running.token("ops", "viewer")
    _, body = await running.get("/api/v1/routing/gateways", token)
    (gw,) = body["gateways"]
    assert (gw["namespace"], gw["name"]) == ("shop", "gw")
    (listener,) = gw["listeners"]
    assert (listener["name"], listener["port"], listener["protocol"]) == ("http", 80, "HTTP")
    assert listener["attachedRoutes"] == 3
    assert {r["name"] for r in gw["routes"]} == {"web", "api", "broken"}
    assert {h["host"] for h in gw["hosts"]} == {"shop.example.com", "broken.example.com"}
    status, one = await running.get("/api/v1/routing/gateways/shop/gw", token)
    assert status == 200 and one["name"] == "gw"
    assert (await running.get("/api/v1/routing/gateways/shop/nope", token))[0] == 404

    _, body = await running.get("/api/v1/problems", token)
    by_name = {(p["object"]["kind"], p["object"]["name"]): p for p in body["problems"]}
    broken = by_name[("HTTPRoute", "broken")]
    (condition,) = broken["conditions"]
    assert (condition["type"], condition["status"]) == ("ResolvedRefs", False)
    assert condition["reason"] == "BackendNotFound"
    assert ("HTTPRoute", "web") not in by_name
    # No address and no proxy yet: the Gateway is not Programmed, and says why.
    gateway = by_name[("Gateway", "gw")]
    (programmed,) = (c for c in gateway["conditions"] if c["type"] == "Programmed")
    assert programmed["status"] is False and programmed["message"]

    _, body = await running.get("/api/v1/events", token)
    assert isinstance(body["events"], list)


async def test_a_route_serving_with_a_rule_dropped_is_a_problem(
    apiserver: ThreadedApiServer, running: Running
) -> None:
    # The second rule's ExternalAuth names no Service: that rule is dropped (its matches answer
    # 500), the first is served, and the route says PartiallyInvalid True.
    auth = {"protocol": "HTTP", "backendRef": {"name": "missing-auth", "port": 80}}
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "partial", "namespace": "shop"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["partial.example.com"],
            "rules": [
                {"backendRefs": [{"name": "web", "port": 80}]},
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/private"}}],
                    "filters": [{"type": "ExternalAuth", "externalAuth": auth}],
                    "backendRefs": [{"name": "web", "port": 80}],
                },
            ],
        },
    }
    apiserver.call(lambda s: s.apply([route]))
    token = running.token("ops", "viewer")

    async def listed() -> dict[str, Any] | None:
        _, body = await running.get("/api/v1/problems", token)
        return next((p for p in body["problems"] if p["object"]["name"] == "partial"), None)

    problem = await eventually(listed, what="the route listed as a problem", within=WAIT)
    by_type = {c["type"]: c for c in problem["conditions"]}
    assert (by_type["ResolvedRefs"]["status"], by_type["PartiallyInvalid"]["status"]) == (
        False,
        True,
    )
    assert "rules[1]" in by_type["PartiallyInvalid"]["message"]


async def test_manifests_as_cached_and_never_secret_data(running: Running) -> None:
    token = running.token("ops", "viewer")
    status, service = await running.get("/api/v1/manifests/Service/shop/web", token)
    assert status == 200 and service["spec"]["ports"][0]["port"] == 80
    status, secret = await running.get("/api/v1/manifests/Secret/shop/cert", token)
    assert status == 200
    assert "data" not in secret and "stringData" not in secret
    assert "kubectl.kubernetes.io/last-applied-configuration" not in secret["metadata"].get(
        "annotations", {}
    )
    assert secret["metadata"]["name"] == "cert"
    status, ns = await running.get("/api/v1/manifests/Namespace/_/shop", token)
    assert status == 200 and ns["metadata"]["name"] == "shop"
    assert (await running.get("/api/v1/manifests/Service/shop/none", token))[0] == 404
    assert (await running.get("/api/v1/manifests/Pod/shop/web", token))[0] == 404


async def test_explain_names_the_winner_and_why_each_other_candidate_lost(
    running: Running,
) -> None:
    token = running.token("ops", "viewer")
    ask = {"gateway": "shop/gw", "port": "80", "host": "shop.example.com", "path": "/api/x"}
    status, body = await running.get("/api/v1/explain", token, {**ask, "method": "GET"})
    assert status == 200
    assert body["listener"] == [{"name": "http", "protocol": "HTTP"}]
    assert body["claimedBy"] == {"listener": "http", "hostname": "*"}
    assert body["outcome"]["route"]["name"] == "web"
    verdicts = {c["route"]["name"]: c["verdict"] for c in body["candidates"]}
    assert verdicts["web"] == "selected"
    assert verdicts["api"] == "method: matches POST, the request is GET"

    async with running.http.post(
        running.url + "/api/v1/explain",
        json={**ask, "method": "POST", "headers": {"X-Any": "1"}},
        headers={"Authorization": f"Bearer {token}"},
    ) as response:
        body = await response.json()
    assert body["outcome"]["route"]["name"] == "api"
    assert body["outcome"]["backends"][0]["weight"] == 1
    verdicts = {c["route"]["name"]: c["verdict"] for c in body["candidates"]}
    assert verdicts["web"].startswith("precedence:")

    _, miss = await running.get("/api/v1/explain", token, {**ask, "host": "other.example"})
    assert miss["outcome"]["status"] == 404 and miss["outcome"]["route"] is None
    assert (await running.get("/api/v1/explain", token, {**ask, "port": "81"}))[0] == 404


async def test_logs_come_through_the_api_server(running: Running) -> None:
    token = running.token("ops", "viewer")
    status, body = await running.get("/api/v1/pods/shop/nope/logs", token)
    assert status == 404 and body["error"]["reason"] == "LogsUnavailable"


async def test_convergence_per_gateway_once_the_proxy_acked_and_bound(running: Running) -> None:
    token = running.token("ops", "viewer")
    _, body = await running.get("/api/v1/routing/gateways/shop/gw", token)
    assert body["convergence"]["converged"] is False and body["convergence"]["durationMs"] is None
    _, health = await running.get("/api/v1/health")
    assert health["subsystems"]["convergence"]["state"] == "converging"
    call, snapshot = await _connect(running)
    await _ack(call, snapshot)

    async def converged() -> dict[str, Any]:
        while True:
            _, gw = await running.get("/api/v1/routing/gateways/shop/gw", token)
            if gw["convergence"]["converged"]:
                return dict(gw)
            await asyncio.sleep(0.02)

    await asyncio.wait_for(_assign_address(running), WAIT)
    gw = await asyncio.wait_for(converged(), WAIT)
    (programmed,) = (c for c in gw["conditions"] if c["type"] == "Programmed")
    assert programmed["status"] is True
    assert gw["convergence"]["generation"] == gw["generation"]
    assert gw["convergence"]["durationMs"] >= 0 and gw["convergence"]["seenAt"].endswith("Z")
    _, health = await running.get("/api/v1/health")
    summary = health["subsystems"]["convergence"]
    assert summary["state"] == "converged" and summary["gateways"] == 1
    assert summary["slowestMs"] == gw["convergence"]["durationMs"]
    status, metrics = await _text(running, "/metrics")
    assert status == 200
    assert "coxswain_controller_gateway_convergence_seconds_count" in metrics


async def _assign_address(running: Running) -> None:
    """What a load balancer does for the Gateway's provisioned VIP Service."""
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "127.0.200.9"}]}}}
    while True:
        try:
            await asyncio.to_thread(
                running.core.patch_namespaced_service_status, "gw-coxswain", "shop", status
            )
            return
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise
            await asyncio.sleep(0.05)


async def _text(running: Running, path: str) -> tuple[int, str]:
    async with running.http.get(running.url + path) as response:
        return response.status, await response.text()


async def test_routes_with_their_parents_conditions_and_events(running: Running) -> None:
    token = running.token("ops", "viewer")
    status, body = await running.get("/api/v1/routing/routes", token)
    assert status == 200
    by_name = {(r["kind"], r["name"]): r for r in body["routes"]}
    assert {("HTTPRoute", n) for n in ("web", "api", "broken")} <= set(by_name)
    (parent,) = by_name[("HTTPRoute", "broken")]["parents"]
    assert parent["parentRef"]["name"] == "gw"
    refs = {c["type"]: c for c in parent["conditions"]}
    assert refs["ResolvedRefs"]["status"] is False
    assert refs["ResolvedRefs"]["reason"] == "BackendNotFound"
    (web_parent,) = by_name[("HTTPRoute", "web")]["parents"]
    assert all(c["status"] for c in web_parent["conditions"])
    assert (await running.get("/api/v1/routing/routes", "not-a-token"))[0] == 401


async def test_a_proxy_that_left_is_listed_as_disconnected(running: Running) -> None:
    token = running.token("ops", "viewer")
    call, snapshot = await _connect(running, "proxy-gone")
    await _ack(call, snapshot)
    await until(lambda: running.runtime.nodes.get("proxy-gone") is not None)
    _, body = await running.get("/api/v1/fleet", token)
    assert [p["nodeId"] for p in body["proxies"]] == ["proxy-gone"]
    assert body["disconnected"] == []
    await call.done_writing()
    await until(lambda: running.runtime.nodes.get("proxy-gone") is None)
    _, body = await running.get("/api/v1/fleet", token)
    assert body["proxies"] == []
    (gone,) = body["disconnected"]
    assert gone["nodeId"] == "proxy-gone" and gone["scope"] == "SharedPool"
    assert gone["acked"]["version"] == snapshot.version
    assert gone["disconnectedAt"] >= gone["connectedAt"]
    # Back again: no longer listed as disconnected.
    again, _ = await _connect(running, "proxy-gone")
    await until(lambda: running.runtime.nodes.get("proxy-gone") is not None)
    _, body = await running.get("/api/v1/fleet", token)
    assert body["disconnected"] == [] and len(body["proxies"]) == 1
    again.cancel()
