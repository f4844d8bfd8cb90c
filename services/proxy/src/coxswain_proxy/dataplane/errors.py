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


class BadGateway(DataplaneError):
    """The upstream broke the protocol, reset the connection, or sent oversized headers."""

    status = 502


class UpstreamUnavailable(DataplaneError):
    """No ready endpoint, or none could be connected to."""

    status = 503


class GatewayTimeout(DataplaneError):
    """timeouts.request or timeouts.backendRequest ran out with no attempt answered."""

    status = 504


class BindError(DataplaneError):
    """A listener could not be bound (port in use, no permission)."""
