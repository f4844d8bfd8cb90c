"""`coxswain-proxy serve` as a process, against the in-test identity service and controller.

Covers: the flags reach the wire (node id, scope, endpoints, token and bundle paths, server
name), /readyz is 503 naming the missing snapshot until one is applied and 200 after, the
discovery metrics, exit status 0 on SIGTERM with a stream open; the readiness text once
discovery has stopped; the slow-client flags and the stream relays' flags reach the data plane's
limits, name their defaults and refuse a bound that is none. Leaves out the stream's behaviour
(discovery/client_test.py) and what the limits do (dataplane/timeouts_test.py, the relays' in
dataplane/stream/).
"""

from __future__ import annotations

import asyncio
import sys
import urllib.error
import urllib.request

import pytest

from coxswain_devkit.processes import ServiceProcess
from coxswain_proxy import cli, testkit
from coxswain_proxy.conftest import StartController, Trust
from coxswain_proxy.dataplane import wiring
from coxswain_proxy.dataplane.runtime import Config
from coxswain_proxy.dataplane.stream.relay_limits import DEFAULT_LIMITS, StreamLimits
from coxswain_proxy.testkit import full, routes
from coxswain_service import admin
from coxswain_service.readiness import Readiness


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
    readiness = Readiness()
    readiness.warn("discovery", "discovery stopped: wire version mismatch")
    server = admin.AdminServer(service="proxy", version="test", readiness=readiness)
    ((_, port),) = await server.start("127.0.0.1", 0)
    try:
        status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/readyz")
        assert (status, body) == (200, "ok\nwarning: discovery stopped: wire version mismatch\n")
    finally:
        await server.stop()


def test_the_slow_client_flags_set_the_data_planes_limits() -> None:
    args = cli._parser().parse_args(
        [
            *("serve", "--shared", "--client-header-timeout", "5", "--client-body-timeout", "7"),
            *("--keepalive-timeout", "9.5", "--tls-handshake-timeout", "3"),
        ]
    )
    config = wiring.config(args)
    assert (
        config.header_timeout,
        config.body_timeout,
        config.keepalive_timeout,
        config.handshake_timeout,
    ) == (5.0, 7.0, 9.5, 3.0)
    assert wiring.config(cli._parser().parse_args(["serve", "--shared"])) == Config()


def test_the_slow_client_flags_name_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in [
        ("--client-header-timeout", Config().header_timeout),
        ("--client-body-timeout", Config().body_timeout),
        ("--keepalive-timeout", Config().keepalive_timeout),
        ("--tls-handshake-timeout", Config().handshake_timeout),
    ]:
        described = text.rsplit(f"{flag} SECONDS", 1)[1].split(" --", 1)[0]
        assert f"(default: {default})" in described, flag


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_slow_client_flag_must_be_a_bound(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["serve", "--shared", "--keepalive-timeout", value])
    assert "--keepalive-timeout" in capsys.readouterr().err


def test_the_stream_flags_set_the_relays_limits() -> None:
    args = cli._parser().parse_args(
        [
            *("serve", "--shared", "--stream-connect-timeout", "1.5"),
            *("--stream-idle-timeout", "30", "--tls-hello-timeout", "2"),
            *("--tls-hello-max-bytes", "4096", "--udp-idle-timeout", "7"),
            *("--udp-max-sessions", "10", "--udp-session-queue", "3"),
        ]
    )
    assert wiring.config(args).stream == StreamLimits(
        connect_timeout=1.5,
        idle_timeout=30.0,
        hello_timeout=2.0,
        hello_bytes=4096,
        udp_idle_timeout=7.0,
        udp_sessions=10,
        udp_queue=3,
    )
    assert wiring.config(cli._parser().parse_args(["serve", "--shared"])).stream == DEFAULT_LIMITS


def test_the_stream_flags_name_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, metavar, default in [
        ("--stream-connect-timeout", "SECONDS", DEFAULT_LIMITS.connect_timeout),
        ("--stream-idle-timeout", "SECONDS", DEFAULT_LIMITS.idle_timeout),
        ("--tls-hello-timeout", "SECONDS", DEFAULT_LIMITS.hello_timeout),
        ("--tls-hello-max-bytes", "BYTES", DEFAULT_LIMITS.hello_bytes),
        ("--udp-idle-timeout", "SECONDS", DEFAULT_LIMITS.udp_idle_timeout),
        ("--udp-max-sessions", "N", DEFAULT_LIMITS.udp_sessions),
        ("--udp-session-queue", "N", DEFAULT_LIMITS.udp_queue),
    ]:
        described = text.rsplit(f"{flag} {metavar}", 1)[1].split(" --", 1)[0]
        assert f"(default: {default})" in described, flag


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        pytest.param("--stream-connect-timeout", "0", id="a-timeout-of-zero-bounds-nothing"),
        pytest.param("--stream-idle-timeout", "inf", id="an-infinite-timeout-bounds-nothing"),
        pytest.param("--tls-hello-timeout", "-2", id="a-negative-timeout"),
        pytest.param("--udp-idle-timeout", "soon", id="a-timeout-that-is-no-number"),
        pytest.param("--tls-hello-max-bytes", "512", id="a-hello-bound-below-a-client-hello"),
        pytest.param("--tls-hello-max-bytes", "2000000", id="a-hello-bound-above-1-mib"),
        pytest.param("--udp-max-sessions", "0", id="no-udp-session-at-all"),
        pytest.param("--udp-session-queue", "1.5", id="a-queue-that-is-no-whole-number"),
    ],
)
def test_a_stream_flag_must_be_a_bound(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["serve", "--shared", flag, value])
    assert flag in capsys.readouterr().err
