"""End to end: the local demo as an operator meets it: every command it prints, run as printed.

`demo.start` brings the demo up from deploy/examples/demo with every service from its PEX file
(`./pants run :demo` runs the same stack from modules) on free Ingress and UI ports, and returns
the text the demo prints. Each command in that text is then run with bash, as an operator would
paste it (KUBECONFIG exported, as the text says to first), and its answer is checked against
what its comment promises: the two Gateways with one hostname told apart by address, demo's
path split, header match, weighted 80/20 and redirect, HTTPS with the demo's CA; the GRPCRoute
through `grpc-call` over h2c and over TLS (the backend's pod, the caller's and the route's
metadata) and a method no rule matches (UNIMPLEMENTED); the dedicated Gateway's own proxy; the
Ingress; the ingress-nginx Ingress set (rewrite-target's path, the canary by header and its
exact weighted share, limit-rps's 429 with Retry-After, basic auth's 401 and 200, the refused
snippet's 404 and its InvalidAnnotation Event); and every kubectl command exits 0. A printed
command this test has no check for fails it, so the text and the test move together.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import demo
from coxswain_devkit.apiserver import kubectl_tool
from coxswain_devkit.stack import Launcher, Stack, StackPorts
from coxswain_devkit.waiting import until

MANIFESTS = Path("deploy/examples/demo")
WAIT = 60.0
POD = re.compile(r'"pod": *"([^"]*)"')
COMMAND = re.compile(r"(curl|for|kubectl|/\S+/grpc-call) ")


def eventually(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    return until(predicate, what, within=timeout, tolerate=(OSError, http.client.HTTPException))


@dataclass
class Printed:
    command: str  # as an operator pastes it (continuation lines joined)
    comment: str  # what the demo says it shows ("" for none)


def printed_commands(text: str) -> list[Printed]:
    """Every indented command of the text (curl, a for-loop, kubectl, the gRPC script), with
    its trailing comment; a line ending in a backslash goes on on the next."""
    found = []
    for line in re.sub(r"\\\n\s*", "", text).splitlines():
        stripped = line.strip()
        if line.startswith("  ") and COMMAND.match(stripped):
            commented = re.match(r"(.*?)\s+# (.*)$", stripped)
            pair = commented.groups() if commented else (stripped, "")
            found.append(Printed(pair[0].strip(), pair[1].strip()))
    return found


@dataclass
class Demo:
    stack: Stack
    text: str
    env: dict[str, str]

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", command], env=self.env, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    workdir = tmp_path_factory.mktemp("demo")
    stack, text = demo.start(
        Launcher.pex_files(Path(".")), workdir, MANIFESTS, ports=StackPorts.free(), ui_port=0
    )
    try:
        assert stack.kubeconfig is not None
        assert f"export KUBECONFIG={stack.kubeconfig}" in text
        kubectl = kubectl_tool.kubectl()
        env = {**os.environ, "KUBECONFIG": str(stack.kubeconfig),
               "PATH": f"{kubectl.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}  # fmt: skip
        yield Demo(stack, text, env)
    finally:
        statuses = stack.stop()
    assert all(code == 0 for code in statuses.values()), statuses


# ------------------------------------------------------------------ what each command promises

Check = Callable[[subprocess.CompletedProcess[str]], bool]


def pods(*expected: str) -> Check:
    """The echo pods named in the output, in order (curl's JSON, or grep's "pod" lines)."""
    return lambda out: POD.findall(out.stdout) == list(expected)


def shares(**counts: int) -> Check:
    return lambda out: {p: POD.findall(out.stdout).count(p) for p in counts} == counts


def grpc_echo(pod: str, **metadata: str) -> Check:
    def check(out: subprocess.CompletedProcess[str]) -> bool:
        seen = json.loads(out.stdout)
        got = {key: seen["headers"].get(key) for key in metadata}
        return bool(seen["pod"] == pod and got == {k: [v] for k, v in metadata.items()})

    return check


def answered(code: int, *fields: str) -> Check:
    """`curl -si`'s status line, and fields of the head (lower case)."""
    return lambda out: (
        out.stdout.startswith(f"HTTP/1.1 {code} ") and all(f in out.stdout.lower() for f in fields)
    )


def rewritten(out: subprocess.CompletedProcess[str]) -> bool:
    return bool(json.loads(out.stdout)["path"] == "/orders/7")


def rate_limited(out: subprocess.CompletedProcess[str]) -> bool:
    codes = out.stdout.split()[:7]
    return codes[:5] == ["200"] * 5 and "429" in codes and "retry-after:" in out.stdout.lower()


def unimplemented(out: subprocess.CompletedProcess[str]) -> bool:
    return out.returncode == 1 and "UNIMPLEMENTED" in out.stderr


def refusal_told(out: subprocess.CompletedProcess[str]) -> bool:
    return "InvalidAnnotation" in out.stdout and "never run" in out.stdout


ROUTE = {"x-route": "demo/echo"}  # the GRPCRoute's RequestHeaderModifier
BY_COMMENT: dict[str, Check] = {
    "demo/demo: echo-v1": pods("echo-v1-0"),
    "demo/staging: echo-staging": pods("echo-staging-0"),
    "path split: v2": pods("echo-v2-0"),
    "header match": pods("echo-canary-0"),
    "weighted 80/20": shares(**{"echo-v1-0": 8, "echo-v2-0": 2}),
    "redirect": answered(301, "location: http://app.demo.example"),
    "gRPC over h2c: echo-grpc": grpc_echo("echo-grpc-0", **ROUTE, **{"x-user": "you"}),
    "over TLS": grpc_echo("echo-grpc-0", **ROUTE),
    "no rule matches: UNIMPLEMENTED": unimplemented,
    "demo/dedicated: echo-dedicated": pods("echo-dedicated-0"),
    "rewrite-target /$2: the path /orders/7": rewritten,
    "canary-by-header": pods("echo-canary-0"),
    "canary-weight 20": shares(**{"echo-v1-0": 8, "echo-canary-0": 2}),
    "limit-rps 1": rate_limited,
    "auth-type basic: 401": answered(401),
    "and with demo:demo": pods("echo-v2-0"),
    "a snippet, refused: 404": answered(404),
    "why: its InvalidAnnotation Event": refusal_told,
}
# Printed without a comment: told apart by what they ask for.
BY_TARGET: dict[str, Check] = {
    "https://app.demo.example": pods("echo-v1-0"),
    "Host: legacy.demo.example": pods("echo-v1-0"),
}


def _check(printed: Printed) -> Check | None:
    if printed.comment in BY_COMMENT:
        return BY_COMMENT[printed.comment]
    found = [check for target, check in BY_TARGET.items() if target in printed.command]
    if found:
        return found[0]
    if printed.command.startswith("kubectl "):
        return lambda out: out.returncode == 0 and bool(out.stdout.strip())
    return None


def _answering(port: int, host: str, path: str, status: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        return conn.getresponse().status == status
    finally:
        conn.close()


def test_every_printed_command_answers_as_its_comment_says(running: Demo) -> None:
    commands = printed_commands(running.text)
    assert set(BY_COMMENT) <= {p.comment for p in commands}, "a part of the demo went missing"
    port = running.stack.ports.ingress_http
    # The text is printed once the Gateways are Programmed; the Ingresses may lag a moment.
    eventually(lambda: _answering(port, "api.nginx.demo.example", "/api/x", 200), "the rewrite")
    eventually(lambda: _answering(port, "internal.nginx.demo.example", "/", 401), "basic auth")
    failures = []
    for printed in commands:
        check = _check(printed)
        if check is None:
            failures.append(f"no check for the printed command: {printed.command}")
            continue
        out = running.run(printed.command)
        try:
            passed = check(out)
        except (ValueError, KeyError):
            passed = False
        if not passed:
            failures.append(
                f"{printed.command}  # {printed.comment}\n  exit {out.returncode}\n"
                f"  stdout: {out.stdout[:600]}\n  stderr: {out.stderr[:600]}"
            )
    assert not failures, "\n".join(failures)
