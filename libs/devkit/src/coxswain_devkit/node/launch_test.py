"""How a container becomes a process (`launch.plan`), and which images run (`images.role_for`).

Table tests on plain values: mounts mapped to materialised files (a path flag at its default,
an explicit path, `--flag=path`), listen addresses set to the pod IP unless explicit, the pod's
name for hostname-default flags, `--kubeconfig` for in-cluster services whose pod mounts a
token (nothing when it mounts none), dialled Service names pointed at their relays, `$(VAR)`
expansion, `command` naming the entry point or refused, and the readiness probe chosen. Env
resolution against ConfigMaps is covered in env_test.py; running the result, in agent_test.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit.node import images, launch
from coxswain_devkit.node.agent import default_launcher
from coxswain_devkit.node.env import CannotRun, expand
from coxswain_devkit.node.launch import Probe
from coxswain_devkit.node.service_relays import Reference

Obj = dict[str, Any]
POD = {"metadata": {"name": "gw-abc-x1", "namespace": "edge", "uid": "u1"}}
IP = "127.0.201.7"
TOKEN_DIR = Path("/pods/p/volumes/discovery-token")
BUNDLE_DIR = Path("/pods/p/volumes/trust-bundle")
MOUNTS = [
    ("/var/run/secrets/coxswain/discovery-token", TOKEN_DIR),
    ("/var/run/secrets/coxswain/trust-bundle/", BUNDLE_DIR),
]


KUBECONFIG = "/pods/p/serviceaccount/kubeconfig"
LAUNCHER = {"proxy": ("py", "-m", "coxswain_proxy"), "controller": ("ctl",), "devkit": ("dk",)}


def _plan(
    container: Obj,
    env: dict[str, str] | None = None,
    *,
    kubeconfig: str | None = KUBECONFIG,
    relayed: dict[Reference, str] | None = None,
) -> launch.Launch:
    return launch.plan(
        POD,
        container,
        env=env or {},
        base_env={"PATH": "/bin"},
        mounts=MOUNTS,
        pod_ip=IP,
        kubeconfig=kubeconfig,
        relayed=relayed or {},
        launcher=LAUNCHER,
    )


def _args(container: Obj, env: dict[str, str] | None = None, **kw: Any) -> list[str]:
    argv = list(_plan(container, env, **kw).argv)
    return argv[3:] if argv[0] == "py" else argv[1:]


PROXY = "ghcr.io/coxswain/coxswain-proxy:1.0"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ["serve", "--dedicated"],
            ["serve", "--dedicated", "--token-path", f"{TOKEN_DIR}/token",
             "--trust-bundle-path", f"{BUNDLE_DIR}/ca.crt", "--listen-address", IP,
             "--admin-address", IP, "--node-id", "gw-abc-x1"],
            id="defaults-under-spec-000-mounts-become-the-materialised-files",
        ),
        pytest.param(
            ["serve", "--token-path=/var/run/secrets/coxswain/discovery-token/t2",
             "--trust-bundle-path", "/etc/ca.crt", "--listen-address", "0.0.0.0",
             "--admin-address", "127.0.0.1", "--node-id", "mine"],
            ["serve", f"--token-path={TOKEN_DIR}/t2", "--trust-bundle-path", "/etc/ca.crt",
             "--listen-address", IP, "--admin-address", "127.0.0.1", "--node-id", "mine"],
            id="explicit-paths-mapped-only-under-a-mount-wildcards-replaced-explicit-kept",
        ),
    ],
)  # fmt: skip
def test_proxy_flags(args: list[str], expected: list[str]) -> None:
    assert _args({"image": PROXY, "args": args}) == expected


def test_command_naming_the_entry_point_and_variables() -> None:
    container = {
        "image": PROXY,
        "command": ["/usr/local/bin/coxswain-proxy"],
        "args": ["serve", "--gateway-name", "$(GW)", "--gateway-namespace", "$$(GW)"],
    }
    args = _args(container, {"GW": "web"})
    assert args[:5] == ["serve", "--gateway-name", "web", "--gateway-namespace", "$(GW)"]
    process = _plan(container, {"GW": "web"})
    assert process.env == {"PATH": "/bin", "HOSTNAME": "gw-abc-x1", "GW": "web"}


def test_a_command_other_than_the_entry_point_is_refused() -> None:
    with pytest.raises(CannotRun) as caught:
        _plan({"image": PROXY, "command": ["sh", "-c", "sleep 1"]})
    assert caught.value.reason == "CreateContainerError"


def test_in_cluster_services_get_the_pods_kubeconfig() -> None:
    image = "coxswain-controller:dev"
    assert _args({"image": image, "args": ["serve"]})[-2:] == ["--kubeconfig", KUBECONFIG]
    given = ["serve", "--api-server", "http://127.0.0.1:1"]
    assert "--kubeconfig" not in _args({"image": image, "args": given})
    # A pod that mounts no token gives its process no credential at all, as in a cluster.
    assert _args({"image": image, "args": ["serve"]}, kubeconfig=None) == [
        "serve",
        "--admin-address",
        IP,
        "--discovery-address",
        IP,
    ]


def test_dialled_service_names_become_their_relays() -> None:
    discovery = Reference("coxswain-system", "coxswain-controller-discovery", 50051)
    args = [
        "serve",
        "--discovery-endpoint=https://coxswain-controller-discovery.coxswain-system.svc:50051",
        "--discovery-bootstrap-endpoint",
        "boot.coxswain-system.svc.cluster.local:50052,elsewhere.example:50052",
    ]
    container = {"image": PROXY, "args": args}
    bootstrap = Reference("coxswain-system", "boot", 50052)
    assert launch.dialled(container, images.ROLES[0], {}) == [discovery, bootstrap]
    planned = _args(container, relayed={discovery: "127.0.0.1:4000"})
    assert planned[1:4] == [
        "--discovery-endpoint=https://127.0.0.1:4000",
        "--discovery-bootstrap-endpoint",
        # No relay (no such Service): left as written, as a name DNS does not answer.
        "boot.coxswain-system.svc.cluster.local:50052,elsewhere.example:50052",
    ]


@pytest.mark.parametrize(
    ("container", "probe"),
    [
        pytest.param(
            {"image": PROXY, "args": ["serve"]}, Probe("http", IP, 9092, "/readyz"),
            id="admin-readyz-by-default",
        ),
        pytest.param(
            {"image": PROXY, "args": ["serve", "--admin-port=9100"]},
            Probe("http", IP, 9100, "/readyz"), id="admin-port-flag",
        ),
        pytest.param(
            {"image": PROXY, "ports": [{"name": "a", "containerPort": 9300}],
             "readinessProbe": {"httpGet": {"path": "/healthz", "port": "a"}}},
            Probe("http", IP, 9300, "/healthz"), id="declared-probe-by-port-name",
        ),
        pytest.param(
            {"image": "x/coxswain-devkit-echo", "args": ["--port", "81"]}, Probe("tcp", IP, 81),
            id="echo-tcp-connect",
        ),
        pytest.param(
            {"image": PROXY, "readinessProbe": {"exec": {"command": ["true"]}}}, None,
            id="exec-probe-not-run",
        ),
    ],
)  # fmt: skip
def test_readiness_probe(container: Obj, probe: Probe | None) -> None:
    assert _plan(container).probe == probe


@pytest.mark.parametrize(
    ("image", "role"),
    [
        pytest.param("coxswain-proxy", "proxy", id="bare"),
        pytest.param(
            "localhost:5000/team/coxswain-identity:1.2@sha256:ab", "identity",
            id="registry-port-tag-digest",
        ),
        pytest.param("ghcr.io/x/coxswain-ui:latest", "ui", id="tag"),
        pytest.param("coxswain-proxy-debug:1", None, id="a-longer-name-is-another-image"),
        pytest.param("nginx", None, id="foreign"),
    ],
)  # fmt: skip
def test_role_for(image: str, role: str | None) -> None:
    found = images.role_for(image)
    assert (found.launcher if found else None) == role


def test_unrunnable_image_message_names_it() -> None:
    with pytest.raises(CannotRun) as caught:
        launch.runnable({"image": "nginx:1.27"}, default_launcher())
    assert caught.value.reason == "ErrImagePull"
    assert 'image "nginx:1.27"' in caught.value.message


def test_expand_follows_the_kubelet() -> None:
    env = {"A": "1"}
    assert expand("$(A)-$(B)-$$(A)-$", env) == "1-$(B)-$(A)-$"
