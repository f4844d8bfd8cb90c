"""Request-target and Host checks: what the router may be given (RFC 9112 §3.2, RFC 9110 §7.2).

Where it sits: `dispatch.start` calls these before routing. A plain request pays for
none of it on its way through: `valid_host` and `valid_target` run only when the routing memo
misses (a memo key holds a Host and a target that passed them), and `absolute` only for a
target not in origin-form. Pure functions over bytes, so each rule is tested on its own.
"""

from __future__ import annotations

import ipaddress
import re

from coxswain_proxy.dataplane import errors
from coxswain_routing import host_pattern_covers, normalize_host

# RFC 9110 §7.2: Host = uri-host [ ":" port ]; RFC 3986 §3.2.2: host = IP-literal / IPv4address
# / reg-name, reg-name = *( unreserved / pct-encoded / sub-delims ), port = *DIGIT. Stricter
# than the grammar in two places: a reg-name may not hold a comma (RFC 9110 §5.3 lets a
# recipient combine repeated fields into one comma-separated line, so "a.com, b.com" reads as
# two Hosts), and a port, when the colon is there, is 1 to 5 digits.
_HOST = re.compile(
    rb"(\[[0-9A-Fa-f:.]{2,45}\]"  # IPv6address (checked properly below)
    rb"|\[[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+;=:]+\]"  # IPvFuture
    rb"|(?:[A-Za-z0-9\-._~!$&'()*+;=]|%[0-9A-Fa-f]{2})*)"  # reg-name (IPv4address is one)
    rb"(?::([0-9]{1,5}))?"
)
_HTTP = b"http://"
_HTTPS = b"https://"
OPTIONS = b"OPTIONS"
CONNECT = b"CONNECT"
ASTERISK = b"*"
# Methods never forwarded. RFC 9110 §9.3.6: CONNECT asks for a tunnel, which this gateway does
# not offer; §9.3.8: TRACE echoes the request, credentials and all, back to whoever can make
# the client send one (answering 405 is the safe reading of "The final recipient of the
# request SHOULD reflect the message received").
REFUSED_METHODS = frozenset({CONNECT, b"TRACE"})
MAX_FORWARDS = 999_999_999  # the largest Max-Forwards passed on (RFC 9110 §7.6.2)


def valid_host(value: bytes) -> bool:
    """Whether a Host field value (or an absolute-form target's authority) is uri-host[:port].

    RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
    request message that lacks a Host header field and to any request message that contains
    more than one Host header field line or a Host header field with an invalid field value."
    """
    match = _HOST.fullmatch(value)
    if match is None:
        return False
    port = match[2]
    if port is not None and not 0 < int(port) <= 65535:
        return False
    literal = match[1]
    if literal[:1] == b"[" and literal[1:2] not in (b"v", b"V"):
        try:
            ipaddress.IPv6Address(literal[1:-1].decode("ascii"))
        except ValueError:
            return False
    return True


def valid_target(url: bytes) -> bool:
    """Whether an origin-form target may be routed and sent on.

    RFC 9112 §3.2.1: origin-form = absolute-path [ "?" query ]: no fragment (RFC 9110 §7.1:
    "fragment identifiers are reserved for client-side processing"), and llhttp lets '#' by.
    """
    return b"#" not in url


def other_form(method: bytes, url: bytes, host: bytes) -> tuple[bytes, bytes]:
    """(Host to route by, target to send on) for a target not in origin-form (RFC 9112 §3.2).

    The target comes back as "*" when the request is for the server as a whole (answered by
    the caller); an absolute-form target's authority replaces `host`. Raises what is refused.
    """
    if method == CONNECT:
        raise errors.MethodNotAllowed("CONNECT is not served")
    if url != ASTERISK:
        host, url = absolute(url)
        if url:
            return host, url
        if method != OPTIONS:
            return host, b"/"  # RFC 9112 §3.2.1: an empty path is sent as "/"
    # RFC 9112 §3.2.4: "The asterisk-form of request-target is only used for a server-wide
    # OPTIONS request"; one for the server as a whole is answered by the server.
    if method != OPTIONS:
        raise errors.MethodNotAllowed("the asterisk-form is for OPTIONS only")
    if not valid_host(host):
        raise errors.BadRequest("the Host is not uri-host[:port]")
    return host, ASTERISK


def absolute(url: bytes) -> tuple[bytes, bytes]:
    """An absolute-form target split into (authority, origin-form target).

    RFC 9112 §3.2.2: "When an origin server receives a request with an absolute-form of
    request-target, the origin server MUST ignore the received Host header field (if any) and
    instead use the host information of the request-target." A proxy in front of it does the
    same, and sends the origin server origin-form with that Host. An empty path comes back as
    b"" (the caller makes it "/", or "*" for OPTIONS: §3.2.4). Raises `errors.BadRequest` for
    any other form, a userinfo or an empty host.
    """
    head = url[:8].lower()
    if head.startswith(_HTTP):
        rest = url[7:]
    elif head == _HTTPS:
        rest = url[8:]
    else:
        raise errors.BadRequest("the request-target is not in origin-form or absolute-form")
    end = len(rest)
    for mark in (rest.find(b"/"), rest.find(b"?")):
        if 0 <= mark < end:
            end = mark
    authority, target = rest[:end], rest[end:]
    # RFC 9110 §4.2.4: "Before making use of an "http" or "https" URI reference received from
    # an untrusted source, a recipient SHOULD parse for userinfo and treat its presence as an
    # error"; §4.2.1: "A recipient that processes such a URI reference [with an empty host
    # identifier] MUST reject it as invalid."
    if b"@" in authority:
        raise errors.BadRequest("userinfo in the request-target")
    if not authority or authority[:1] == b":":
        raise errors.BadRequest("no host in the request-target")
    if not target:
        return authority, b""
    if target[:1] == b"?":
        target = b"/" + target
    return authority, target


Headers = list[tuple[bytes, bytes]]


def forwards(headers: Headers) -> Headers | None:
    """An OPTIONS request's fields as they go on, or None when it must not go on.

    RFC 9110 §7.6.2: with Max-Forwards 0 "the recipient MUST NOT forward the request; instead,
    the recipient MUST respond as the final recipient"; with more, "the intermediary MUST
    generate an updated Max-Forwards field in the forwarded message with a field value that is
    the lesser of a) the received value decremented by one (1) or b) the recipient's maximum
    supported value for Max-Forwards".
    """
    index, hops = max_forwards(headers)
    if hops == 0:
        return None
    if hops < 0:
        return headers
    updated = list(headers)
    updated[index] = (headers[index][0], b"%d" % min(hops - 1, MAX_FORWARDS))
    return updated


def max_forwards(headers: Headers) -> tuple[int, int]:
    """(index, value) of a valid Max-Forwards field in `headers`; (-1, -1) when there is none.

    Max-Forwards = 1*DIGIT: a value that is not is ignored, as if absent.
    """
    for i, (name, value) in enumerate(headers):
        if len(name) == 12 and name.lower() == b"max-forwards":
            value = value.strip(b" \t")
            if not value.isdigit():
                return -1, -1
            # Beyond "the recipient's maximum supported value" any value will do: not decoded.
            return i, int(value) if len(value) <= 9 else MAX_FORWARDS + 1

    return -1, -1


def sni_names(hostnames: tuple[str, ...], server_name: str) -> tuple[str, ...]:
    """The hostname of the port's listener the TLS server name selected; () when any Host is
    fine (issue 7, item 4: a Host outside it is answered 421)."""
    if not hostnames:
        return ()  # an Ingress port, or only hostless listeners: nothing narrows the Host
    server_name = normalize_host(server_name)
    best = ""
    for pattern in hostnames:
        # The one wildcard rule (coxswain_routing), as the controller attached routes by it.
        if (
            pattern
            and host_pattern_covers(pattern, server_name)
            and (not best or best.startswith("*."))
        ):
            best = pattern
    return (best,) if best else ()
