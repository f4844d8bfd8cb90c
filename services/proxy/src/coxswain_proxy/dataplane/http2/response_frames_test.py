"""A forwarded response as an HTTP/2 client gets it: the HEADERS block and DATA the cycle sends.

Covers what `h2stream.StreamCycle` builds straight from the upstream's fields (no HTTP/1.1
bytes in between): names lower-cased (RFC 9113 §8.2.1), connection-specific fields and the
fields a Connection option names dropped (§8.2.2), a Date added when the backend sent none
(RFC 9110 §6.6.1), the proxy's Via (§7.6.3), a 204's Content-Length dropped (RFC 9110 §8.6), a
rule's and a backendRef's ResponseHeaderModifier applied; a body sent chunked, one delimited by
the backend's close, and a HEAD's bodiless answer each end the stream; the proxy's own answers
(a 404) still reach the client. Left out: what `rfc9113_test` covers (routing, windows,
malformed requests).
"""

from __future__ import annotations

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2.h2client import Answer, connected
from coxswain_proxy.dataplane.http2.scripted import scripted
from coxswain_routing import Backend, Filter, ResponseHeaderModifier, Rule


def _rule(slot_filters: tuple[Filter, ...] = ()) -> Rule:
    rule_filters = (ResponseHeaderModifier(set=(("X-Rule", "r"),), remove=("X-Drop",)),)
    slot = Backend(endpoints="endpoints/default/b/80", filters=slot_filters)
    return t.rule("r", slot, filters=rule_filters)


async def _answer(upstream: bytes, method: str = "GET", rule: Rule | None = None) -> Answer:
    """What an HTTP/2 client gets when the backend answers `upstream` (then closes)."""
    async with scripted() as (port, arrived):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER, t.endpoints("b", port), t.routes("", rule or _rule()),
        ]  # fmt: skip
        async with t.running(resources) as plane, connected(t.actual(plane)) as client:
            stream = client.request("/", method=method)
            backend = await arrived.get()
            await backend.until(b"\r\n\r\n")
            backend.write(upstream)
            if b"content-length" not in upstream.lower() and b"chunked" not in upstream:
                assert backend.transport is not None
                backend.transport.close()
            return await client.answer(stream)


def _fields(answer: Answer) -> dict[bytes, list[bytes]]:
    seen: dict[bytes, list[bytes]] = {}
    for name, value in answer.headers:
        seen.setdefault(name, []).append(value)
    return seen


async def test_the_head_is_lowercased_filtered_and_dated() -> None:
    upstream = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive, X-Secret\r\n"
        b"X-Secret: s\r\nKeep-Alive: timeout=5\r\nX-Drop: d\r\nX-Kept: k\r\n"
        b"Content-Length: 2\r\n\r\nok"
    )
    answer = await _answer(upstream)
    fields = _fields(answer)
    assert (answer.status, answer.body, answer.ended) == (200, b"ok", True)
    assert all(name == name.lower() for name in fields)
    assert fields[b"content-type"] == [b"text/plain"] and fields[b"x-kept"] == [b"k"]
    assert fields[b"x-rule"] == [b"r"]  # the rule's ResponseHeaderModifier
    for gone in (b"connection", b"keep-alive", b"x-secret", b"x-drop"):
        assert gone not in fields, gone
    assert fields[b"date"][0].endswith(b" GMT")
    assert fields[b"via"] == [b"1.1 coxswain"]  # RFC 9110 §7.6.3, as HTTP/1.1 clients get it


async def test_a_backendref_modifier_applies_and_the_backends_date_stays() -> None:
    slot_filters = (ResponseHeaderModifier(add=(("X-Slot", "s"),)),)
    upstream = (
        b"HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\ncontent-length: 0\r\n\r\n"
    )
    answer = await _answer(upstream, rule=_rule(slot_filters))
    fields = _fields(answer)
    assert fields[b"x-slot"] == [b"s"] and fields[b"x-rule"] == [b"r"]
    assert fields[b"date"] == [b"Tue, 01 Dec 2026 00:00:00 GMT"]


@pytest.mark.parametrize(
    ("upstream", "body"),
    [
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"abcde",
            id="chunked",
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\n\r\nuntil the close", b"until the close", id="close"),
        pytest.param(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n", b"", id="204"),
    ],
)
async def test_each_body_framing_ends_the_stream(upstream: bytes, body: bytes) -> None:
    answer = await _answer(upstream)
    assert (answer.body, answer.ended, answer.reset) == (body, True, None)
    fields = _fields(answer)
    assert b"transfer-encoding" not in fields
    if answer.status == 204:
        assert b"content-length" not in fields  # RFC 9110 §8.6


async def test_a_head_answer_ends_with_its_headers() -> None:
    answer = await _answer(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", method="HEAD")
    assert (answer.status, answer.body, answer.ended) == (200, b"", True)
    assert _fields(answer)[b"content-length"] == [b"5"]


async def test_the_proxys_own_answer_still_reaches_the_client() -> None:
    async with scripted() as (port, _):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER, t.endpoints("b", port), t.routes("only.example", _rule()),
        ]  # fmt: skip
        async with t.running(resources) as plane, connected(t.actual(plane)) as client:
            answer = await client.get("/", authority="other.example")
    assert (answer.status, answer.ended) == (404, True)
    assert answer.body.startswith(b"404")
