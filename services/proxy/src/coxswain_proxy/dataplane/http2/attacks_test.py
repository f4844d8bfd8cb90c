"""Known HTTP/2 attacks, each bounded (docs/security.md), driven by the `h2` library as a client.

Covers: rapid reset (CVE-2023-44487) and PING, SETTINGS and PRIORITY floods end the connection
with GOAWAY ENHANCE_YOUR_CALM past their bound; an HPACK bomb (a header list that decodes past
SETTINGS_MAX_HEADER_LIST_SIZE) gets ENHANCE_YOUR_CALM; a CONTINUATION flood ends with GOAWAY;
a client that never opens its window has its stream reset once the body timeout passes (the
sweep runs on a clock the test moves).
"""

from __future__ import annotations

import asyncio

import h2.settings
import hyperframe.frame
import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2 import limits
from coxswain_proxy.dataplane.http2.h2client import H2Client, connected
from coxswain_proxy.dataplane.runtime import Config

BOUNDS = limits.H2Limits(max_resets=20, max_control_frames=50)
CONFIG = Config(h2=BOUNDS)


def _snapshot(port: int) -> list[t.Resource]:
    return [t.HTTP_LISTENER, t.endpoints("a", port), t.routes("", t.rule("r", t.backend("a")))]


async def _cut_off(client: H2Client) -> int:
    await client.until(lambda: client.closed)
    assert client.goaway is not None and client.goaway.error_code is not None
    return int(client.goaway.error_code)


async def test_rapid_reset_ends_the_connection() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port), CONFIG) as plane,
        connected(t.actual(plane)) as client,
    ):
        for _ in range(BOUNDS.max_resets + 5):
            stream = client.request("/")
            client.h2.reset_stream(stream, limits.CANCEL)
        client.flush()
        assert await _cut_off(client) == limits.ENHANCE_YOUR_CALM


@pytest.mark.parametrize("kind", ["ping", "settings", "priority"])
async def test_control_frame_floods_end_the_connection(kind: str) -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port), CONFIG) as plane,
        connected(t.actual(plane)) as client,
    ):
        for i in range(BOUNDS.max_control_frames + 5):
            if kind == "ping":
                client.h2.ping(b"%08d" % i)
            elif kind == "settings":
                client.h2.update_settings({h2.settings.SettingCodes.ENABLE_PUSH: 0})
            else:
                client.h2.prioritize(1 + 2 * i, weight=16)
        client.flush()
        assert await _cut_off(client) == limits.ENHANCE_YOUR_CALM


async def test_an_hpack_bomb_is_refused() -> None:
    big = (b"x-big", b"v" * 4000)  # indexed once, then one byte per reference
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        client.request("/", extra=[big] * 12)  # 48 KB decoded, past 32 KiB
        assert await _cut_off(client) == limits.ENHANCE_YOUR_CALM


async def test_a_continuation_flood_ends_the_connection() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        block = client.h2.encoder.encode(
            [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/")]
        )
        frames: list[hyperframe.frame.Frame] = [hyperframe.frame.HeadersFrame(1, data=block)]
        frames += [hyperframe.frame.ContinuationFrame(1, data=b"") for _ in range(200)]
        client.writer.write(b"".join(f.serialize() for f in frames))
        assert await _cut_off(client) != limits.NO_ERROR


async def test_a_window_never_opened_resets_the_stream_after_the_body_timeout() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        client.auto_window = False
        client.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        stream = client.request("/")
        answer = client.answers[stream]
        await client.until(lambda: answer.status != 0)
        await asyncio.sleep(0.05)  # the response body reaches the proxy, and waits there
        plane.sweep(asyncio.get_running_loop().time() + CONFIG.body_timeout + 1)
        await client.answer(stream)
    assert answer.reset == limits.CANCEL and answer.body == b""
