"""From a pod's container to the process the node agent starts: argv, environment, readiness.

Pure: the caller resolves the environment (`env.resolve`) and materialises the volumes first,
then `plan` decides the rest. The container's `command`/`args` become the service's own
arguments (a `command` must name the image's entry point, since there is no image filesystem to
run anything else from), with `$(VAR)` expanded as the kubelet does. Then what a container
would have given the process is passed through the service's flags (see `images`):
- an argument naming a file under a volumeMount's mountPath is rewritten to the materialised
  file, and a path flag left at its default gets the materialised file when the default lies
  under a mount (the proxy's token at spec 000's `/var/run/secrets/coxswain/...`);
- listen addresses left unset or at a wildcard get the pod's IP;
- flags that default to the hostname get the pod's name, and a service that would use the
  in-cluster API configuration gets `--kubeconfig` with the pod's ServiceAccount token when the
  pod mounts one (`api_access`), else nothing (as a pod without a token, it has no credential);
- a Service's cluster DNS name and port in a flag it dials with becomes the address of the
  node's relay for that Service (`service_relays`; the caller resolves `dialled` first).
Readiness comes from the container's `readinessProbe` (httpGet or tcpSocket) if it has one, else
from the service's own `/readyz` on its admin port (a TCP connect for the echo backend).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coxswain_devkit.node import images, service_relays
from coxswain_devkit.node.env import CannotRun, expand
from coxswain_devkit.node.service_relays import Reference

__all__ = [
    "Launch",
    "Probe",
    "dialled",
    "plan",
    "runnable",
    "flag_value",
    "host_path",
    "IMAGE_ERROR",
]

Obj = dict[str, Any]
# (mountPath, the file or directory it shows), as the container's volumeMounts declare them.
Mounts = Sequence[tuple[str, Path]]

# The kubelet's reason for an image it could not get; here: an image it cannot run.
IMAGE_ERROR = "ErrImagePull"
_WILDCARDS = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True, slots=True)
class Probe:
    kind: str  # "http" (200-399 is ready) or "tcp" (a connect is ready)
    host: str  # the address probed
    port: int  # the port probed
    path: str = "/"  # the HTTP path
    scheme: str = "HTTP"  # "HTTP" or "HTTPS" (certificates are not checked, as the kubelet's)


@dataclass(frozen=True, slots=True)
class Launch:
    argv: tuple[str, ...]  # the whole command line
    env: Mapping[str, str]  # the whole environment
    probe: Probe | None  # None: ready once started


def _find(args: Sequence[str], flag: str) -> int | None:
    for i, arg in enumerate(args):
        if arg == flag or arg.startswith(flag + "="):
            return i
    return None


def flag_value(args: Sequence[str], flag: str) -> str | None:
    i = _find(args, flag)
    if i is None:
        return None
    if args[i] != flag:
        return args[i].partition("=")[2]
    return args[i + 1] if i + 1 < len(args) else ""


def _set(args: list[str], flag: str, value: str) -> None:
    i = _find(args, flag)
    if i is None:
        args += [flag, value]
    elif args[i] != flag:
        args[i] = f"{flag}={value}"
    elif i + 1 < len(args):
        args[i + 1] = value
    else:
        args.append(value)


def _entry_args(role: images.Role, container: Obj) -> list[str]:
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if not command:
        return [*role.entry_args, *args]
    if os.path.basename(command[0]) == role.script:
        return [*command[1:], *args]
    raise CannotRun(
        "CreateContainerError",
        f"command {command[0]!r} is not the image's entry point {role.script!r}: the devkit "
        "node runs a Coxswain image only as its own entry point",
    )


def host_path(path: str, mounts: Mounts) -> str | None:
    """The materialised file a path inside the container is, if a mount covers it."""
    for mount_path, local in sorted(mounts, key=lambda m: -len(m[0])):
        prefix = mount_path.rstrip("/")
        if path == prefix or path.startswith(prefix + "/"):
            return str(local / path[len(prefix) :].lstrip("/"))
    return None


def _map_paths(args: list[str], mounts: Mounts) -> list[str]:
    mapped = []
    for arg in args:
        flag, eq, value = arg.partition("=")
        if eq and flag.startswith("-") and value.startswith("/"):
            local = host_path(value, mounts)
            mapped.append(f"{flag}={local}" if local else arg)
        elif arg.startswith("/"):
            mapped.append(host_path(arg, mounts) or arg)
        else:
            mapped.append(arg)
    return mapped


def _service_flags(
    role: images.Role, args: list[str], pod: Obj, pod_ip: str, kubeconfig: str | None
) -> None:
    for flag in role.address_flags:
        if (flag_value(args, flag) or "") in _WILDCARDS:
            _set(args, flag, pod_ip)
    for flag, field in role.name_flags:
        if flag_value(args, flag) is None:
            _set(args, flag, str(pod["metadata"][field]))
    configured = flag_value(args, "--api-server") or flag_value(args, "--kubeconfig")
    if role.api_server and configured is None and kubeconfig is not None:
        _set(args, "--kubeconfig", kubeconfig)


def _arguments(role: images.Role, container: Obj, env: Mapping[str, str]) -> list[str]:
    return [expand(a, env) for a in _entry_args(role, container)]


def dialled(container: Obj, role: images.Role, env: Mapping[str, str]) -> list[Reference]:
    """The Services (by cluster DNS name and port) the container's dial flags name."""
    args = _arguments(role, container, env)
    found = [flag_value(args, flag) or "" for flag in role.dial_flags]
    return [ref for value in found for ref in service_relays.references(value)]


def _relay_dials(role: images.Role, args: list[str], relayed: Mapping[Reference, str]) -> None:
    for flag in role.dial_flags:
        value = flag_value(args, flag)
        if value:
            _set(args, flag, service_relays.rewrite(value, dict(relayed)))


def _port(container: Obj, port: Any) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise CannotRun("CreateContainerConfigError", f"probe port {port!r} names no containerPort")


def _probe(role: images.Role, container: Obj, args: Sequence[str], pod_ip: str) -> Probe | None:
    declared = container.get("readinessProbe") or {}
    if "httpGet" in declared:
        get = declared["httpGet"]
        host = str(get.get("host") or pod_ip)
        scheme = str(get.get("scheme", "HTTP")).upper()
        return Probe("http", host, _port(container, get.get("port")), get.get("path", "/"), scheme)
    if "tcpSocket" in declared:
        tcp = declared["tcpSocket"]
        return Probe("tcp", str(tcp.get("host") or pod_ip), _port(container, tcp.get("port")))
    if declared:
        return None  # exec and gRPC probes are not run: ready once started
    if role.admin_port is not None:
        flag, default = role.admin_port
        host = flag_value(args, "--admin-address") or pod_ip
        return Probe("http", host, int(flag_value(args, flag) or default), "/readyz")
    if role.tcp_port is not None:
        flag, default = role.tcp_port
        return Probe("tcp", pod_ip, int(flag_value(args, flag) or default))
    return None


def runnable(container: Obj, launcher: Mapping[str, Sequence[str]]) -> images.Role:
    """The role the container's image runs, or `CannotRun` naming what can be run."""
    image = str(container.get("image", ""))
    role = images.role_for(image)
    if role is None or role.launcher not in launcher:
        names = ", ".join(r.image for r in images.ROLES)
        raise CannotRun(
            IMAGE_ERROR,
            f'the devkit node cannot run image "{image}": it runs only these images '
            f"(any registry and tag): {names}",
        )
    return role


def plan(
    pod: Obj,
    container: Obj,
    *,
    env: Mapping[str, str],
    base_env: Mapping[str, str],
    mounts: Mounts,
    pod_ip: str,
    kubeconfig: str | None,
    relayed: Mapping[Reference, str],
    launcher: Mapping[str, Sequence[str]],
) -> Launch:
    """The process for `container`, or `CannotRun` with the kubelet-style reason why not.

    `kubeconfig`: the pod's API credential, if it mounts one; `relayed`: where each Service
    that `dialled` named is reached on this machine."""
    role = runnable(container, launcher)
    args = _map_paths(_arguments(role, container, env), mounts)
    for flag, default in role.path_flags:
        local = host_path(default, mounts)
        if flag_value(args, flag) is None and local is not None:
            _set(args, flag, local)
    _service_flags(role, args, pod, pod_ip, kubeconfig)
    _relay_dials(role, args, relayed)
    process_env = {**base_env, "HOSTNAME": str(pod["metadata"]["name"]), **env}
    argv = (*launcher[role.launcher], *args)
    return Launch(argv, process_env, _probe(role, container, args, pod_ip))
