"""The echo backend over real sockets: HTTP/1.1 JSON, WebSocket echo, h2c, and the gRPC echo.

Covers the conformance-shaped JSON (method, path with query, host, headers as lists, query,
protocol, namespace, pod), `X-Echo-Set-Header`, text and binary WebSocket messages, an h2c
request by prior knowledge (spoken with the `h2` client), and the conformance `GrpcEcho`
service called by a grpcio client whose messages protoc made from `grpcecho.proto`: Echo and
EchoTwo answered with the method, metadata, authority and identity, EchoThree and unknown
methods UNIMPLEMENTED, the TLS assertions on a TLS port; the hand-written codec read and
written against protoc's; malformed, compressed and multi-message requests refused.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import grpc
import h2.config
import h2.connection
import h2.events
import pytest

from coxswain_devkit.echo import EchoServer, grpc_echo
from coxswain_devkit.echo import grpc_messages as pb
from coxswain_devkit.echo.web import Identity
from coxswain_devkit.pki import CertificateAuthority


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    async with EchoServer(
        namespace="team", pod="echo-0", service="echo", grpc_port=0, h2c_port=0
    ) as server:
        yield server


@pytest.fixture(scope="module")
def protoc_made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The messages protoc generates from `grpcecho.proto`: the reference the codec must equal."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("protoc")
    source = Path(__file__).with_name("grpcecho.proto")
    args = ["protoc", f"-I{source.parent}", f"--python_out={out}", source.name]
    assert protoc.main(args) == 0
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("grpcecho_pb2")
    finally:
        sys.path.remove(str(out))
        sys.modules.pop("grpcecho_pb2", None)


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


async def _call(channel: grpc.aio.Channel, method: str, made: ModuleType, **kwargs: Any) -> Any:
    call = channel.unary_unary(
        method,
        request_serializer=made.EchoRequest.SerializeToString,
        response_deserializer=made.EchoResponse.FromString,
    )
    return await call(made.EchoRequest(), timeout=10, **kwargs)


@pytest.mark.parametrize("method", [pb.ECHO, pb.ECHO_TWO])
async def test_grpc_echo_answers_as_the_conformance_echo(
    echo: EchoServer, protoc_made: ModuleType, method: str
) -> None:
    options = (("grpc.default_authority", "grpc.example"),)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{echo.grpc_port}", options) as channel:
        reply = await _call(channel, method, protoc_made, metadata=(("x-test", "yes"),))
    seen = reply.assertions
    assert seen.fully_qualified_method == method
    assert (seen.context.namespace, seen.context.pod, seen.context.service_name) == (
        "team", "echo-0", "echo",
    )  # fmt: skip
    assert seen.authority == "grpc.example"
    headers = {(h.key, h.value) for h in seen.headers}
    assert {("x-test", "yes"), (":authority", "grpc.example")} <= headers
    assert ("content-type", "application/grpc") in headers
    assert not any(key in ("te", "grpc-timeout") for key, _ in headers)  # gRPC's own
    assert not seen.HasField("tls_assertions")


@pytest.mark.parametrize(
    ("method", "message"),
    [
        pytest.param(pb.ECHO_THREE, "method EchoThree not implemented", id="EchoThree"),
        pytest.param("/any.Service/Method", "unknown method /any.Service/Method", id="unknown"),
    ],
)
async def test_grpc_echo_unimplemented_methods(
    echo: EchoServer, protoc_made: ModuleType, method: str, message: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{echo.grpc_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _call(channel, method, protoc_made)
    assert failed.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert failed.value.details() == message


async def test_grpc_echo_over_tls_reports_the_connection(
    tmp_path: Path, protoc_made: ModuleType
) -> None:
    ca = CertificateAuthority.create("echo CA")
    issued = ca.issue(dns=["grpc.example"])
    (tmp_path / "c.pem").write_bytes(issued.chain_pem)
    (tmp_path / "k.pem").write_bytes(issued.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.certificate_pem)
    async with (
        EchoServer(pod="tls-0", grpc_port=0, grpc_ssl_context=context) as echo,
        grpc.aio.secure_channel(f"localhost:{echo.grpc_port}", credentials,
                                (("grpc.ssl_target_name_override", "grpc.example"),)) as channel,
    ):  # fmt: skip
        reply = await _call(channel, pb.ECHO, protoc_made)
    tls = reply.assertions.tls_assertions
    assert (tls.version, tls.negotiated_protocol, tls.server_name) == (
        "TLSv1.3", "h2", "grpc.example",
    )  # fmt: skip
    assert tls.cipher_suite.startswith("TLS_")
    assert reply.assertions.context.pod == "tls-0"


def test_the_codec_reads_and_writes_what_protoc_does(protoc_made: ModuleType) -> None:
    ours = pb.EchoResponse(
        pb.Assertions(
            fully_qualified_method=pb.ECHO,
            headers=(pb.Header("x-a", "1"), pb.Header("x-a", "2"), pb.Header("ü", "é")),
            authority="a.example",
            context=pb.Context("ns", "ing", "svc", "pod-0"),
            tls_assertions=pb.TLSAssertions("TLSv1.3", "h2", "a.example", "TLS_X", ("p1", "p2")),
        )
    )
    theirs = protoc_made.EchoResponse.FromString(ours.encode())
    assert theirs.assertions.fully_qualified_method == pb.ECHO
    assert [(h.key, h.value) for h in theirs.assertions.headers] == [
        ("x-a", "1"), ("x-a", "2"), ("ü", "é"),
    ]  # fmt: skip
    assert theirs.assertions.context.service_name == "svc"
    assert list(theirs.assertions.tls_assertions.peer_certificates) == ["p1", "p2"]
    assert pb.EchoResponse.decode(theirs.SerializeToString()) == ours
    empty = protoc_made.EchoResponse.FromString(pb.EchoResponse().encode())
    assert empty.HasField("assertions") and not empty.assertions.HasField("context")


IDENTITY = Identity(namespace="ns", pod="p")
REQUEST = [(b":method", b"POST"), (b":path", pb.ECHO.encode()), (b":authority", b"a"),
           (b"content-type", b"application/grpc")]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        pytest.param(b"", grpc_echo.INTERNAL, "got 0 request", id="no-message"),
        pytest.param(pb.frame(b"") * 2, grpc_echo.INTERNAL, "got 2 request", id="two-messages"),
        pytest.param(b"\x00\x00\x00", grpc_echo.INTERNAL, "cut short", id="short-prefix"),
        pytest.param(b"\x00\x00\x00\x00\x09ab", grpc_echo.INTERNAL, "shorter", id="truncated"),
        pytest.param(
            b"\x01" + pb.frame(b"")[1:], grpc_echo.UNIMPLEMENTED, "compressed", id="compressed"
        ),
        pytest.param(pb.frame(b"\x0a\x05ab"), grpc_echo.INTERNAL, "shorter", id="bad-protobuf"),
        pytest.param(pb.frame(b"\x0b"), grpc_echo.INTERNAL, "wire type 3", id="group-field"),
    ],
)
def test_requests_that_are_not_one_well_formed_message_are_refused(
    body: bytes, code: int, message: str
) -> None:
    reply = grpc_echo.answer(REQUEST, body, IDENTITY)
    fields = dict(reply.headers)
    assert reply.trailers is None and not reply.data  # Trailers-Only
    assert fields[b"grpc-status"] == b"%d" % code
    assert message in fields[b"grpc-message"].decode()


def test_unknown_fields_are_skipped_and_binary_metadata_decoded() -> None:
    extra = [(b"x-id-bin", b"aGVsbG8"), (b"x-raw-bin", b"//8"), (b"grpc-timeout", b"1S")]
    reply = grpc_echo.answer(REQUEST + extra, pb.frame(b"\x08\x01\x12\x00"), IDENTITY)
    assert reply.trailers == [(b"grpc-status", b"0")]
    ((_, message),) = pb.messages(reply.data)
    seen = pb.EchoResponse.decode(message).assertions
    assert seen.metadata("x-id-bin") == ["hello"]  # base64 without its padding
    assert seen.metadata("x-raw-bin") == ["//8"]  # not UTF-8 once decoded: left as sent
    assert seen.metadata("grpc-timeout") == []


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
