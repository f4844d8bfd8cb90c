"""The identity service's exceptions, each knowing the gRPC status it becomes.

Everything below the gRPC boundary raises one of these (third-party errors are mapped where they
happen, `raise ... from exc`); `server.py` turns them into a status code, a counter label and a
log line. The `result` of each is the `result` label of the issuance counter.
"""

from __future__ import annotations

import grpc


class IdentityError(Exception):
    """A refusal or failure that ends one IssueSvid call."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    result: str = "internal"


class Unauthenticated(IdentityError):
    """The token is not a valid ServiceAccount token for our audience."""

    code = grpc.StatusCode.UNAUTHENTICATED
    result = "unauthenticated"


class PermissionDenied(IdentityError):
    """The token is valid but its ServiceAccount may not hold an SVID."""

    code = grpc.StatusCode.PERMISSION_DENIED
    result = "permission_denied"


class InvalidRequest(IdentityError):
    """A request field of the wrong type, too long, or with characters it may not hold."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    result = "invalid_argument"


class InvalidCsr(IdentityError):
    """The CSR cannot be parsed, its key is too weak, or its signature does not hold."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    result = "invalid_argument"


class Unavailable(IdentityError):
    """No CA is loaded, or the Kubernetes API could not be reached: the caller should retry."""

    code = grpc.StatusCode.UNAVAILABLE
    result = "unavailable"


class InvalidCa(Exception):
    """The CA Secret exists but does not hold a usable CA (not a CA, key mismatch, expired)."""


class CaMissing(Exception):
    """The CA Secret does not exist (and the mode does not allow creating it)."""
