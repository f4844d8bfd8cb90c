"""API errors as the Kubernetes API server reports them: an HTTP code and a `Status` body.

Every handler raises `ApiError`; one middleware turns it into the response. Clients (the
`kubernetes` client's `ApiException`, kubectl's messages) read `reason`, `message` and
`details`, so those follow kube-apiserver's wording where clients depend on it.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    causes: list[dict[str, str]]
    retryAfterSeconds: int


class Status(TypedDict):
    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    status: str
    message: str
    reason: str
    code: int
    details: NotRequired[StatusDetails]


class ApiError(Exception):
    """A request the API server refuses, with the status code and reason it answers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: StatusDetails | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Status:
        body = Status(
            kind="Status",
            apiVersion="v1",
            metadata={},
            status="Failure",
            message=self.message,
            reason=self.reason,
            code=self.code,
        )
        if self.details is not None:
            body["details"] = self.details
        return body


def _subject(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    details = StatusDetails(name=name, group=group, kind=resource)
    return ApiError(
        404, "NotFound", f'{_subject(resource, group)} "{name}" not found', details=details
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    details = StatusDetails(name=name, group=group, kind=resource)
    message = f'{_subject(resource, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, details=details)


def conflict(resource: str, group: str, name: str) -> ApiError:
    details = StatusDetails(name=name, group=group, kind=resource)
    message = (
        f'Operation cannot be fulfilled on {_subject(resource, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, details=details)


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422: `causes` are (field, message) pairs, reported as FieldValueInvalid."""
    listed = [{"reason": "FieldValueInvalid", "field": f, "message": m} for f, m in causes]
    summary = ", ".join(f"{f}: {m}" for f, m in causes)
    details = StatusDetails(name=name, group=group, kind=kind, causes=listed)
    message = f'{kind}.{group or "core"} "{name}" is invalid: {summary}'
    return ApiError(422, "Invalid", message, details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(message: str = "the server does not allow this method") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    message = (
        f"the body of the request was in an unknown format ({content_type}) - accepted media types "
        "include: application/json, application/yaml, application/json-patch+json, "
        "application/merge-patch+json, application/strategic-merge-patch+json (built-in kinds)"
    )
    return ApiError(415, "UnsupportedMediaType", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests() -> ApiError:
    details = StatusDetails(retryAfterSeconds=1)
    return ApiError(
        429, "TooManyRequests", "the server has received too many requests", details=details
    )


def internal_error(message: str = "an injected fault") -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
