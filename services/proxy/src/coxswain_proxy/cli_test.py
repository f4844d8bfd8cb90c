"""`coxswain-proxy serve` as a process, against the in-test identity service and controller.

Covers: the flags reach the wire (node id, scope, endpoints, token and bundle paths, server
name), /readyz is 503 naming the missing snapshot until one is applied and 200 after, the
discovery metrics, exit status 0 on SIGTERM with a stream open; the readiness text once
discovery has stopped. Leaves out the stream's behaviour (client_test.py).
"""

from __future__ import annotations

import asyncio
import sys
import urllib.error
import urllib.request

from coxswain_devkit.processes import ServiceProcess
from coxswain_proxy import admin, testkit
from coxswain_proxy.conftest import StartController, Trust
from coxswain_proxy.testkit import full, routes


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _argv(trust: Trust, identity_port: int, controller_port: int) -> list[str]:
    return [
        *(sys.executable, "-m", "coxswain_proxy", "serve", "--dedicated"),
        *("--gateway-namespace", "team", "--gateway-name", "gw"),
        *("--admin-address", "127.0.0.1", "--admin-port", "0", "--node-id", "pod-7"),
        *("--discovery-endpoint", f"https://127.0.0.1:{controller_port}"),
        *("--discovery-bootstrap-endpoint", f"127.0.0.1:{identity_port}"),
        *("--token-path", str(trust.token_path), "--trust-bundle-path", str(trust.bundle_path)),
        *("--discovery-server-name", "localhost"),
    ]


async def test_serve_subscribes_becomes_ready_on_a_snapshot_and_stops_on_sigterm(
    trust: Trust, identity: testkit.Identity, start_controller: StartController
) -> None:
    controller = await start_controller()
    with ServiceProcess(_argv(trust, identity.port, controller.port)) as proc:
        listening = await asyncio.to_thread(proc.wait_for_msg, "admin server listening")
        base = f"http://127.0.0.1:{listening['port']}"
        stream = await controller.next_stream()
        subscribe = await stream.expect("subscribe")
        assert subscribe.node_id == "pod-7"
        assert subscribe.scope.gateway is not None
        assert (subscribe.scope.gateway.namespace, subscribe.scope.gateway.name) == ("team", "gw")
        status, body = await asyncio.to_thread(_get, f"{base}/readyz")
        assert (status, body) == (
            503,
            "not ready: no routing snapshot received from the controller yet\n",
        )

        stream.send(full([routes("a.example.com")], seq=5))
        await stream.expect("node_status")
        await stream.expect("ack")
        assert await asyncio.to_thread(_get, f"{base}/readyz") == (200, "ok\n")
        _, metrics = await asyncio.to_thread(_get, f"{base}/metrics")
        assert 'coxswain_proxy_snapshots_total{result="applied"} 1.0' in metrics
        assert "coxswain_proxy_discovery_connected 1.0" in metrics
        assert "coxswain_proxy_snapshot_publish_seq 5.0" in metrics
        assert "coxswain_proxy_svid_expiry_timestamp_seconds" in metrics

        assert await asyncio.to_thread(proc.stop, grace=5.0) == 0
    await testkit.within(stream.client_done.wait())


async def test_readyz_names_a_stopped_discovery_without_failing_a_proxy_that_holds_routing() -> (
    None
):
    readiness = admin.Readiness()
    readiness.warn("discovery", "discovery stopped: wire version mismatch")
    runner = await admin.start("127.0.0.1", 0, readiness)
    try:
        port = runner.addresses[0][1]
        status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/readyz")
        assert (status, body) == (200, "ok\nwarning: discovery stopped: wire version mismatch\n")
    finally:
        await runner.cleanup()
