"""Two worker processes behind one port: a snapshot reaches both before `apply` returns, both
serve, stats merge, and shutdown ends them. Leaves out load spreading (the kernel's business)."""

from __future__ import annotations

import socket

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.core import Options
from coxswain_proxy.dataplane.workers import Workers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_two_workers_serve_one_port_after_one_apply() -> None:
    port = free_port()  # SO_REUSEPORT needs the same explicit port in every worker
    async with EchoServer() as echo:
        resources: list[t.Resource] = [
            t.listeners((port, t.ListenerProtocol.HTTP, "")),
            t.endpoints("echo", echo.port),
            t.routes("example.com", t.rule("r", t.backend("echo")), port=port),
        ]
        options = Options(shared=False, address="127.0.0.1", reuse_port=True)
        workers = await Workers(options).start(2)
        try:
            bound = await workers.apply(resources, "v1")
            assert [b.port for b in bound] == [port]
            statuses = [(await t.get(port)).status for _ in range(10)]
            assert statuses == [200] * 10
            stats = await workers.stats()
            assert sum(n for (_, c), n in stats.requests.items() if c == 2) == 10
        finally:
            await workers.close(grace=1.0)
