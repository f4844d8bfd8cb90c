"""`coxswain-identity serve` as a real process: flags, readiness, an SVID through it, SIGTERM.

Runs the module with this interpreter (PYTHONPATH from the test's own path) against an
in-test API emulator reached through a `--kubeconfig` (plain HTTP), the way the demo runs it.
Covers the announced port, /readyz turning 200 once the CA is loaded, IssueSvid verified
against the published trust ConfigMap, the issuance counter on /metrics, and exit 0 on SIGTERM.
Also the flag parsers. Leaves out in-cluster configuration, which needs a real cluster.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.processes import ServiceProcess
from coxswain_identity import cli, service, trust
from coxswain_identity.conftest import NAMESPACE, SHARED_PROXY, eventually, issue, make_csr, token


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


@pytest.fixture
def process(api: ThreadedApiServer, core: Any, tmp_path: Path) -> Iterator[ServiceProcess]:
    kubeconfig = api.call(lambda server: server.write_kubeconfig(tmp_path / "kubeconfig"))
    argv = [
        sys.executable, "-m", "coxswain_identity", "serve",
        "--address", "127.0.0.1", "--port", "0",
        "--admin-address", "127.0.0.1", "--admin-port", "0",
        "--kubeconfig", str(kubeconfig), "--svid-ttl", "2h",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with ServiceProcess(argv, env=env) as proc:
        yield proc


async def test_serve_issues_an_svid_and_stops_on_sigterm(
    process: ServiceProcess, core: Any
) -> None:
    port = process.wait_for_msg("identity listening")["port"]
    admin = f"http://127.0.0.1:{process.wait_for_msg('admin server listening')['port']}"
    process.wait_for_msg("certificate authority loaded")
    assert _get(f"{admin}/readyz") == (200, "ok\n")
    bundle = await eventually(lambda: _published(core))

    response = await issue(port, token(core, SHARED_PROXY), make_csr(), trust=bundle)
    leaf = x509.load_pem_x509_certificates(response.certificate_chain_pem)[0]
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(bundle))
    lifetime = leaf.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert abs(lifetime - datetime.timedelta(hours=2)) < datetime.timedelta(minutes=1)
    assert (
        'coxswain_identity_svid_issuance_total{result="issued"} 1.0' in _get(f"{admin}/metrics")[1]
    )
    issued = process.wait_for_msg("svid issued")
    assert issued["service_account"] == str(SHARED_PROXY)
    assert "token" not in issued

    assert process.stop(grace=5.0) == 0
    process.wait_for_msg("stopped")


def _published(core: Any) -> bytes | None:
    try:
        configmap = core.read_namespaced_config_map(trust.TRUST_CONFIGMAP, NAMESPACE)
    except Exception:  # noqa: BLE001 - not published yet
        return None
    return str(configmap.data[trust.TRUST_KEY]).encode()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("24h", 86400, id="hours"),
        pytest.param("90m", 5400, id="minutes"),
        pytest.param("45s", 45, id="seconds"),
        pytest.param("3600", 3600, id="bare-seconds"),
        pytest.param("7d", 604800, id="days"),
    ],
)
def test_duration_accepts_units(text: str, seconds: int) -> None:
    assert cli.duration(text) == datetime.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["0", "-1h", "1w", "h", ""])
def test_duration_refuses_nonsense(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        cli.duration(text)


def test_defaults_match_the_spec() -> None:
    args = cli._parser().parse_args(["serve"])
    settings: service.Settings = cli.settings(args)
    assert settings.port == 50052
    assert str(settings.ca_secret) == "coxswain-system/coxswain-discovery-ca"
    assert str(settings.shared_proxy) == "coxswain-system/coxswain-proxy"
    assert settings.policy.svid_ttl == datetime.timedelta(hours=24)
    assert settings.policy.trust_domain == "cluster.local"
    assert settings.serving_dns == (
        "coxswain-controller-discovery-bootstrap.coxswain-system.svc",
        "localhost",
    )
