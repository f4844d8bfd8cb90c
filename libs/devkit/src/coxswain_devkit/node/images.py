"""The images the node agent can run, and what it must know about each service to run it here.

There is no container runtime: a Coxswain image is run as that service's own entry point on
this machine (`python -m coxswain_proxy ...`, or however the caller's launcher starts the role).
What a container would give the process for free has to be handed to it through the service's
own flags instead, so each role lists them:
- the flags naming a listen address, set to the pod's IP (a pod's 0.0.0.0 is its own network
  namespace; here it would be the whole machine, and replicas would collide);
- the flags naming a file it reads from a mount (the projected token, the trust bundle), with
  their defaults, so the materialised file can be passed when the default lies under a mount;
- flags that default to the hostname, which is the pod's name in a pod;
- whether it talks to the Kubernetes API (in a pod: the in-cluster configuration; here:
  `--kubeconfig` with the pod's ServiceAccount token, see `api_access`), and where its admin
  server answers `/readyz`;
- the flags naming another Service it dials by its cluster DNS name, which the node points at a
  local relay for that Service instead (`service_relays`).
The devkit's echo backend is runnable too (image `coxswain-devkit-echo`), a cheap pod for tests.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Role", "ROLES", "TOKEN_PATH", "TRUST_BUNDLE_PATH", "repository", "role_for"]

# Spec 000: the projected token (audience coxswain-discovery) and the trust bundle's mount paths.
TOKEN_PATH = "/var/run/secrets/coxswain/discovery-token/token"  # noqa: S105 (a path)
TRUST_BUNDLE_PATH = "/var/run/secrets/coxswain/trust-bundle/ca.crt"


@dataclass(frozen=True, slots=True)
class Role:
    launcher: str  # the launcher's key for the program: "proxy", ..., "devkit"
    image: str  # the last segment of the image's repository, e.g. "coxswain-proxy"
    script: str  # the console script the image's entry point runs
    entry_args: tuple[str, ...] = ()  # what the entry point puts before the container's args
    address_flags: tuple[str, ...] = ()  # listen addresses: the pod IP unless given explicitly
    path_flags: tuple[tuple[str, str], ...] = ()  # (flag, default file) read from mounts
    name_flags: tuple[tuple[str, str], ...] = ()  # (flag, "name"|"namespace") of the pod
    api_server: bool = False  # takes --api-server / --kubeconfig (else in-cluster config)
    dial_flags: tuple[str, ...] = ()  # endpoints it dials, by Service DNS name in a cluster
    admin_port: tuple[str, int] | None = None  # (flag, default): where /readyz is served
    tcp_port: tuple[str, int] | None = None  # (flag, default): readiness is a TCP connect


ROLES: tuple[Role, ...] = (
    Role(
        launcher="proxy",
        image="coxswain-proxy",
        script="coxswain-proxy",
        address_flags=("--listen-address", "--admin-address"),
        path_flags=(("--token-path", TOKEN_PATH), ("--trust-bundle-path", TRUST_BUNDLE_PATH)),
        name_flags=(("--node-id", "name"),),  # defaults to the hostname: the pod's name
        dial_flags=("--discovery-endpoint", "--discovery-bootstrap-endpoint"),
        admin_port=("--admin-port", 9092),
    ),
    Role(
        launcher="controller",
        image="coxswain-controller",
        script="coxswain-controller",
        address_flags=("--admin-address", "--discovery-address"),
        api_server=True,
        admin_port=("--admin-port", 9090),
    ),
    Role(
        launcher="identity",
        image="coxswain-identity",
        script="coxswain-identity",
        address_flags=("--admin-address", "--address"),
        api_server=True,
        admin_port=("--admin-port", 9091),
    ),
    Role(
        launcher="ui",
        image="coxswain-ui",
        script="coxswain-ui",
        address_flags=("--admin-address", "--address"),
        dial_flags=("--controller-url",),
        admin_port=("--admin-port", 9093),
    ),
    Role(
        launcher="devkit",
        image="coxswain-devkit-echo",
        script="coxswain-devkit",
        entry_args=("echo",),
        address_flags=("--address",),
        name_flags=(("--pod", "name"), ("--namespace", "namespace")),
        tcp_port=("--port", 8080),
    ),
)


def repository(image: str) -> str:
    """The image without its digest and tag: `reg:5000/a/b:1@sha256:...` is `reg:5000/a/b`."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def role_for(image: str) -> Role | None:
    """The role an image runs: its repository's last segment names it, whatever the registry."""
    last = repository(image).rsplit("/", 1)[-1]
    return next((role for role in ROLES if role.image == last), None)
