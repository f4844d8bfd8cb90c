"""External auth as the Gateway API's ExternalAuth filter asks it (GEP-1494, protocol HTTP).

Where it sits: `extauth.AuthCall` runs every auth exchange; for an `ExternalAuth` of style
`EXT_AUTHZ` it asks this module for the auth request's head and for what to do with the
answer. The style follows Envoy's ext_authz over HTTP, which GEP-1494 is modelled on, rather
than ingress-nginx's auth_request (`extauth`'s own):

- the auth request is the client's method and Host, with `http.path` put before the client's
  target; it carries Authorization and the `allowedHeaders` the client sent, and
  Content-Length: 0 (the body is not forwarded), beside the proxy's own Via and X-Forwarded-*;
- 200 lets the request through, each field of the answer that `allowedResponseHeaders` names
  (or, when it names none, every field but those describing the answer itself) replacing the
  request's field of that name;
- any other answer goes to the client as the auth service gave it: its status, its fields and
  its body (bounded by `MAX_DENIAL_BODY`; a longer one is a failure, 500).

Gateway API, HTTPExternalAuthFilter.protocol: "When this is set to HTTP, each backend must
respond with a `200` status code in on a successful authorization. Any other code is
considered an authorization failure."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coxswain_proxy.dataplane.http import heads, responses

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.policies.compiled_policy import ExternalCheck
    from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle

__all__ = ["MAX_DENIAL_BODY", "answer_fields", "head", "pass_on"]

MAX_DENIAL_BODY = 64 * 1024  # the bytes of a denial's body passed on to the client
_CONTENT_LENGTH_0 = (heads.CONTENT_LENGTH, b"0")
# Fields of the answer that describe the answer as a message, never copied onto the request:
# its framing and connection (RFC 9112 §6, RFC 9110 §7.6.1), its Host (HTTPAuthConfig.
# allowedResponseHeaders: "all headers from the authorization server except Authority or Host
# must be copied"), its Date and Server, and the Content-* fields of its own body.
_ANSWER_OWN = heads.HOP_BY_HOP | {heads.HOST, heads.CONTENT_LENGTH, b"date", b"server"}
# Fields of a denial the proxy writes itself when it passes the answer on.
_WRITTEN = heads.HOP_BY_HOP | {heads.CONTENT_LENGTH, b"date", b"server"}
_NO_BODY = frozenset({204, 304})
_CORS_PREFIX = b"access-control-"


def head(cycle: PolicedCycle, check: ExternalCheck) -> bytes:
    """The auth request's head: the client's method, Host and target (after the prefix)."""
    sent = check.sent
    fields = [(n, v) for n, v in cycle.headers if n.lower() in sent]
    fields.append(_CONTENT_LENGTH_0)
    host = heads.header(cycle.headers, heads.HOST) or (cycle.host or b"")
    data, _ = heads.upstream_request(
        cycle.method, check.target + cycle.url, fields, host=host,
        forwarded=cycle.conn.forwarded, plan=(),
    )  # fmt: skip
    return data


def answer_fields(
    check: ExternalCheck, status: int, pairs: heads.Headers
) -> list[tuple[bytes, bytes]]:
    """What of the answer's fields is used: those copied onto the request (200), or those
    passed on to the client (any other status)."""
    if status != 200:
        return [(n, v) for n, v in pairs if n.lower() not in _WRITTEN]
    copied = check.copied
    if copied:
        return [(n, v) for n, v in pairs if n.lower() in copied]
    return [(n, v) for n, v in pairs if not _own(n.lower())]


def _own(name: bytes) -> bool:
    return name in _ANSWER_OWN or name.startswith(b"content-")


def pass_on(
    cycle: PolicedCycle, status: int, fields: list[tuple[bytes, bytes]], body: bytes
) -> None:
    """Answer the client with the auth service's denial: its status, fields and body."""
    cors = cycle.cors
    if cors:  # the rule's CORS answer replaces the auth service's, as it does a backend's
        fields = [(n, v) for n, v in fields if not n.lower().startswith(_CORS_PREFIX)]
    parts = [responses.status_line(status), responses.SERVER, responses.date_line()]
    for name, value in (*fields, *cors):
        parts += (name, b": ", value, b"\r\n")
    if status in _NO_BODY:
        body = b""  # RFC 9110 §8.6: no Content-Length in a 204; §15.4.5: a 304 has no content
    else:
        parts.append(b"content-length: %d\r\n" % len(body))
    if cycle.method == b"HEAD":
        body = b""
    if cycle.must_close():
        parts.append(responses.CLOSE)
    parts += (b"\r\n", body)
    cycle.answer(status, b"".join(parts))
