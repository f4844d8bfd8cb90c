"""The echo backend over real sockets: HTTP/1.1 JSON, WebSocket echo, h2c, and the gRPC echo.

Covers the conformance-shaped JSON (method, path with query, host, headers as lists, query,
protocol, namespace, pod), `X-Echo-Set-Header`, text and binary WebSocket messages, an h2c
request by prior knowledge (spoken with the `h2` client), and a gRPC call to an arbitrary
method answered with the method, metadata and identity.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import grpc
import h2.config
import h2.connection
import h2.events
import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_devkit.echo.grpc_echo import ECHO_METHOD


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    async with EchoServer(namespace="team", pod="echo-0", grpc_port=0, h2c_port=0) as server:
        yield server


async def test_http_request_is_described(echo: EchoServer) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{echo.url}/a/b?x=1&x=2", headers={"Host": "example.com", "X-Test": "yes"}, data=b"hi"
        ) as response,
    ):
        seen = await response.json()
    assert seen["method"] == "POST"
    assert seen["path"] == "/a/b?x=1&x=2"
    assert seen["host"] == "example.com"
    assert seen["headers"]["X-Test"] == ["yes"]
    assert seen["query"] == {"x": ["1", "2"]}
    assert seen["protocol"] == "HTTP/1.1"
    assert (seen["namespace"], seen["pod"]) == ("team", "echo-0")


async def test_set_header_adds_response_headers(echo: EchoServer) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(echo.url, headers={"X-Echo-Set-Header": "X-Foo: bar, X-Baz: qux"}) as response,
    ):
        assert (response.headers["X-Foo"], response.headers["X-Baz"]) == ("bar", "qux")


async def test_websocket_echoes_text_and_binary(echo: EchoServer) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{echo.url}/ws") as ws:
        await ws.send_str("hello")
        assert await ws.receive_str(timeout=10) == "hello"
        await ws.send_bytes(b"\x00\x01")
        assert await ws.receive_bytes(timeout=10) == b"\x00\x01"


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(ECHO_METHOD, id="conventional"),
        pytest.param("/any.Service/AnyMethod", id="arbitrary"),
    ],
)
async def test_grpc_echo_answers_any_method(echo: EchoServer, method: str) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{echo.grpc_port}") as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        reply = json.loads(await call(b"12345", metadata=(("x-test", "yes"),), timeout=10))
    assert reply["method"] == method
    assert reply["metadata"]["x-test"] == ["yes"]
    assert reply["request_size"] == 5
    assert (reply["namespace"], reply["pod"]) == ("team", "echo-0")


async def test_h2c_request_by_prior_knowledge_is_described(echo: EchoServer) -> None:
    assert echo.h2c_port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", echo.h2c_port)
    client = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
    client.initiate_connection()
    request = [
        (":method", "GET"),
        (":path", "/h2?q=1"),
        (":scheme", "http"),
        (":authority", "h2.example"),
        ("x-test", "yes"),
    ]
    client.send_headers(1, request, end_stream=True)
    writer.write(client.data_to_send())
    body, done = b"", False
    try:
        while not done:
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            assert chunk, "the server closed the connection"
            for event in client.receive_data(chunk):
                if isinstance(event, h2.events.DataReceived):
                    body += event.data
                    client.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                done = done or isinstance(event, h2.events.StreamEnded)
            writer.write(client.data_to_send())
    finally:
        writer.close()
        await writer.wait_closed()
    seen = json.loads(body)
    assert (seen["protocol"], seen["method"], seen["path"], seen["host"]) == (
        "HTTP/2.0",
        "GET",
        "/h2?q=1",
        "h2.example",
    )
    assert seen["headers"]["x-test"] == ["yes"]
    assert seen["query"] == {"q": ["1"]}
    assert (seen["namespace"], seen["pod"]) == ("team", "echo-0")
