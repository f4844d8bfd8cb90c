"""The data plane's exceptions: each proxy error knows the HTTP status it answers with."""

from __future__ import annotations


class DataplaneError(Exception):
    """Base of every error the data plane raises on purpose."""

    status = 500


class BadRequest(DataplaneError):
    """The client sent something that is not HTTP/1.1 (spec: answered 400, then closed)."""

    status = 400


class HeadersTooLarge(DataplaneError):
    """The request line or headers exceed the configured limit."""

    status = 431


class TargetTooLong(DataplaneError):
    """The request-target exceeds `Config.max_target_bytes` (RFC 9112 §3: 414)."""

    status = 414


class MethodNotAllowed(DataplaneError):
    """A method the proxy never forwards (CONNECT, TRACE) or that does not apply to the target.

    RFC 9110 §15.5.6: the 405 response carries an Allow field (`responses.ALLOW`).
    """

    status = 405


class NotImplementedCoding(DataplaneError):
    """A transfer coding other than chunked (RFC 9112 §6.1: "SHOULD respond with 501")."""

    status = 501


class VersionNotSupported(DataplaneError):
    """An HTTP-version other than 1.0 or 1.1 in the request line (RFC 9110 §15.6.6: 505)."""

    status = 505


class BadGateway(DataplaneError):
    """The upstream broke the protocol (a malformed response, oversized headers)."""

    status = 502


class UpstreamUnavailable(DataplaneError):
    """No ready endpoint, or none could be connected to (refused, timed out, TLS failed)."""

    status = 503


class ConnectionLost(UpstreamUnavailable):
    """The upstream connection closed or was reset, or its HTTP/2 stream reset, before the
    response ended: a connection failure like a failed connect (retried alike, and a 503 when
    no response has started; docs/routing.md, "Retries and timeouts")."""


class UpstreamClosed(ConnectionLost):
    """The upstream closed its connection cleanly: the end of a body delimited by the close
    (RFC 9112 §6.3 (8)); before or inside any other message, a `ConnectionLost`."""


class GatewayTimeout(DataplaneError):
    """timeouts.request or timeouts.backendRequest ran out with no attempt answered."""

    status = 504


class BindError(DataplaneError):
    """A listener could not be bound (port in use, no permission)."""
