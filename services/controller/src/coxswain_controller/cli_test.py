"""`coxswain-controller serve` as a real process: the discovery listener speaks mTLS on its port.

Covers the CLI wiring of the discovery listener (CA files, serving certificate, admission) and
clean shutdown with live streams, and the provisioning flags (NodePort refused with the reason,
the rest reaching translation's options). Leaves out the stream protocol
(discovery/server_test.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest

from coxswain_controller import cli, runtime
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
