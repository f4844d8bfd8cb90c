"""The echo backend: HTTP/1.1 (and WebSocket), h2c and gRPC servers answering with what they saw.

    async with EchoServer(namespace="ns", pod="echo-0", grpc_port=0) as echo:
        ...  # echo.url, echo.grpc_port

See `web` for the JSON it answers, `grpc_echo` for the gRPC service (the Gateway API
conformance suite's `GrpcEcho`, messages in `grpc_messages`) and `h2c` for the HTTP/2 server
that carries it. The gRPC port and the h2c port run the same server: gRPC calls get the gRPC
echo, other requests the JSON; `grpc_ssl_context` serves the gRPC port over TLS (ALPN h2).
"""

from __future__ import annotations

import logging
import ssl
from types import TracebackType

from aiohttp import web as aioweb

from coxswain_devkit.echo import h2c
from coxswain_devkit.echo.web import Identity, application

__all__ = ["EchoServer", "Identity"]

log = logging.getLogger("coxswain_devkit.echo")


class EchoServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        grpc_port: int | None = None,
        h2c_port: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        grpc_ssl_context: ssl.SSLContext | None = None,
        namespace: str = "default",
        pod: str = "echo",
        service: str = "",
    ) -> None:
        self.host = host
        self.port = port
        self.grpc_port = grpc_port
        self.h2c_port = h2c_port
        self._ssl = ssl_context  # serve the HTTP port over TLS (a BackendTLSPolicy's backend)
        self._grpc_ssl = grpc_ssl_context
        self._h2c: h2c.H2Server | None = None
        self.identity = Identity(namespace=namespace, pod=pod, service=service)
        self._runner: aioweb.AppRunner | None = None
        self._grpc: h2c.H2Server | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> EchoServer:
        runner = aioweb.AppRunner(application(self.identity), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await aioweb.TCPSite(runner, self.host, self.port, ssl_context=self._ssl).start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("echo listening", extra={"fields": {"address": self.host, "port": self.port}})
        if self.grpc_port is not None:
            self._grpc, self.grpc_port = await h2c.start(
                self.identity, self.host, self.grpc_port, self._grpc_ssl
            )
            log.info(
                "grpc echo listening",
                extra={"fields": {"address": self.host, "port": self.grpc_port}},
            )
        if self.h2c_port is not None:
            self._h2c, self.h2c_port = await h2c.start(self.identity, self.host, self.h2c_port)
            log.info(
                "h2c echo listening",
                extra={"fields": {"address": self.host, "port": self.h2c_port}},
            )
        return self

    async def stop(self) -> None:
        for server in (self._h2c, self._grpc):
            if server is not None:
                await server.close()
        self._h2c = self._grpc = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> EchoServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
