"""Helpers for the data plane's tests: snapshots in a few lines, a raw HTTP/1.1 client.

Kept out of the tests so each test reads as the rule it checks. Only tests import this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import httptools
import pytest

from coxswain_proxy.dataplane.core import Dataplane, Options
from coxswain_proxy.dataplane.runtime import Config
from coxswain_routing import (
    Backend,
    Endpoint,
    EndpointSet,
    Filter,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Match,
    PathMatch,
    Resource,
    Retry,
    RouteId,
    Rule,
    Timeouts,
)

NO_TIMEOUTS = Timeouts()
NO_RETRY = Retry()
PORT = 18080  # the routing port the tests' HTTP Gateway listener uses
TLS_PORT = 18443


def endpoints(name: str, *ports: int, ready: bool = True) -> EndpointSet:
    eps = tuple(Endpoint("127.0.0.1", p, ready=ready) for p in ports)
    return EndpointSet("default", name, 80, eps)


def backend(name: str, weight: int = 1, filters: tuple[Filter, ...] = ()) -> Backend:
    return Backend(weight=weight, endpoints=f"endpoints/default/{name}/80", filters=filters)


def rule(
    name: str,
    *backends: Backend,
    path: str = "/",
    path_type: str = "PathPrefix",
    filters: tuple[Filter, ...] = (),
    timeouts: Timeouts = NO_TIMEOUTS,
    retry: Retry = NO_RETRY,
    match: Match | None = None,
) -> Rule:
    from coxswain_routing import PathType

    return Rule(
        id=RouteId(0, "default", name),
        matches=(match or Match(path=PathMatch(PathType(path_type), path)),),
        filters=filters,
        backends=backends,
        timeouts=timeouts,
        retry=retry,
    )


def routes(host: str, *rules: Rule, port: int = PORT) -> HostRoutes:
    return HostRoutes(table="gateway/default/gw", bind_port=port, host=host, rules=rules)


def listeners(*entries: tuple[int, ListenerProtocol, str]) -> GatewayListeners:
    built = tuple(
        Listener(name=f"l{i}", port=port, bind_port=port, protocol=proto, hostname=host)
        for i, (port, proto, host) in enumerate(entries)
    )
    return GatewayListeners("default", "gw", 1, built)


HTTP_LISTENER = listeners((PORT, ListenerProtocol.HTTP, ""))


@contextlib.asynccontextmanager
async def running(
    resources: Sequence[Resource], config: Config | None = None
) -> AsyncIterator[Dataplane]:
    """A dedicated-mode data plane on loopback, every port bound to an ephemeral one."""
    options = Options(
        shared=False, address="127.0.0.1", config=config or Config(), port_map=lambda _: 0
    )
    plane = await Dataplane(options).start()
    try:
        await plane.apply(resources)
        yield plane
    finally:
        await plane.close(grace=1.0)


def actual(plane: Dataplane, port: int = PORT) -> int:
    return next(b.actual for b in plane.bound() if b.port == port)


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None


class _Collect:
    def __init__(self) -> None:
        self.done: list[Response] = []
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode(), value.decode()))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        self.done.append(Response(status, self._headers, b"".join(self._body)))
        self._headers, self._body = [], []


class Client:
    """A raw HTTP/1.1 client: sends bytes, parses responses, reports a close."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._collect = _Collect()

    @classmethod
    async def open(cls, port: int, context: ssl.SSLContext | None = None, sni: str = "") -> Client:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname=sni or None if context else None
        )
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    async def responses(self, count: int, within: float = 10.0) -> list[Response]:
        async with asyncio.timeout(within):
            while len(self._collect.done) < count:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("closed before the responses arrived")
                self._collect.parser.feed_data(data)
        done, self._collect.done = self._collect.done, []
        return done

    async def response(self) -> Response:
        return (await self.responses(1))[0]

    async def request(
        self, path: str = "/", host: str = "example.com", extra: str = ""
    ) -> Response:
        self.send(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode())
        return await self.response()

    async def closed(self, within: float = 10.0) -> bytes:
        """Everything until the server closes the connection."""
        async with asyncio.timeout(within):
            return await self.reader.read()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await self.writer.wait_closed()


@contextlib.asynccontextmanager
async def client(
    port: int, context: ssl.SSLContext | None = None, sni: str = ""
) -> AsyncIterator[Client]:
    opened = await Client.open(port, context, sni)
    try:
        yield opened
    finally:
        await opened.close()


async def get(port: int, path: str = "/", host: str = "example.com", extra: str = "") -> Response:
    async with client(port) as c:
        return await c.request(path, host, extra)


async def served_by(port: int, host: str) -> str:
    """The echo pod that answered a GET / for `host`, or the status when no echo did."""
    response = await get(port, host=host)
    if response.status != 200:
        return str(response.status)
    pod: str = json.loads(response.body)["pod"]
    return pod


# ------------------------------------------------------------------------------ deltas

# Two routes on backend "a", then one edit applied the way staging applies a delta: the
# resources it does not touch stay the same objects, so the data plane reuses what it compiled.
ONE, TWO = "one.example.com", "two.example.com"
Held = dict[str, Resource]
Edit = Callable[[Held, int], Held]  # (resources held, backend b's port) -> the next ones


def two_routes(a_port: int, b_port: int) -> Held:
    listed: list[Resource] = [
        HTTP_LISTENER,
        endpoints("a", a_port),
        endpoints("b", b_port),
        routes(ONE, rule("one", backend("a"))),
        routes(TWO, rule("two", backend("a"))),
    ]
    return {r.key: r for r in listed}


def _replaced(held: Held, resource: Resource) -> Held:
    return {**held, resource.key: resource}


def backend_edited(held: Held, b_port: int) -> Held:
    return _replaced(held, routes(ONE, rule("one", backend("b"))))


def endpoints_moved(held: Held, b_port: int) -> Held:
    return _replaced(held, endpoints("a", b_port))


def route_removed(held: Held, b_port: int) -> Held:
    gone = routes(ONE).key
    return {key: r for key, r in held.items() if key != gone}


def route_added(held: Held, b_port: int) -> Held:
    return _replaced(held, routes("three.example.com", rule("three", backend("b"))))


# (edit, which pod each host reaches after it): every case keeps TWO untouched.
DELTAS = [
    pytest.param(backend_edited, {ONE: "b", TWO: "a"}, id="a-routes-backend-edited"),
    pytest.param(endpoints_moved, {ONE: "b", TWO: "b"}, id="an-endpoint-set-changed"),
    pytest.param(route_removed, {ONE: "404", TWO: "a"}, id="a-route-removed"),
    pytest.param(route_added, {ONE: "a", TWO: "a", "three.example.com": "b"}, id="a-route-added"),
]
