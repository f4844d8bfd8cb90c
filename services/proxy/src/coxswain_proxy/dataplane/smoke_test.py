from __future__ import annotations

import json

from coxswain_devkit.echo import EchoServer

from coxswain_proxy.dataplane import testing as t


async def test_smoke() -> None:
    async with EchoServer() as echo:
        res = [t.HTTP_LISTENER, t.endpoints("echo", echo.port), t.routes("example.com", t.rule("r", t.backend("echo")))]
        async with t.running(res) as plane:
            port = t.actual(plane)
            async with t.client(port) as c:
                for _ in range(3):
                    r = await c.request("/a?b=c")
                    assert r.status == 200, r
                    body = json.loads(r.body)
                    assert body["path"] == "/a?b=c"
