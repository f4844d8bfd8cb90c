"""Protobuf on the wire: request bodies read into JSON, answers written for protobuf-only clients.

kubectl (1.32 and later) sends the bodies of `kubectl create <kind>` and `create token` as
`application/vnd.kubernetes.protobuf`, and Go clients configured for protobuf do the same for
every create, update and delete body. `read_body` turns such a body into the object's JSON form
(see `kproto`), so the rest of the server never sees protobuf; a body that does not decode is a
400 naming the field, as the API server's decoder reports it.

Answers stay JSON whenever the client accepts JSON (kubectl's `Accept` lists both). A client that
accepts only protobuf gets its answer re-encoded by `middleware`: objects, lists and Status
errors of the kinds the schema covers; anything else (custom resources, Tables, discovery) is a
406, as the API server answers for a media type a resource cannot be written in.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from coxswain_devkit.apiserver import errors, kproto

MEDIA = "application/vnd.kubernetes.protobuf"
_JSON_LIKE = ("application/json", "application/yaml", "*/*", "application/*")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_protobuf(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == MEDIA


def read_body(raw: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON object it encodes (apiVersion and kind included)."""
    try:
        return kproto.unwrap(raw)
    except kproto.DecodeError as err:
        details = errors.StatusDetails(
            causes=[{"reason": "FieldValueInvalid", "message": err.reason, "field": err.field}]
        )
        raise errors.ApiError(
            400,
            "BadRequest",
            f"the body of the request could not be decoded as protobuf: {err}",
            details=details,
        ) from err


def _media_types(accept: str) -> list[str]:
    return [part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip()]


def wants_protobuf(accept: str) -> bool:
    """Whether the client accepts protobuf and nothing JSON can be answered as."""
    types = _media_types(accept)
    return MEDIA in types and not any(t in _JSON_LIKE or t.endswith("+json") for t in types)


def _not_acceptable(doc: Any) -> web.Response:
    kind = doc.get("kind", "this resource") if isinstance(doc, dict) else "this resource"
    status = errors.ApiError(
        406,
        "NotAcceptable",
        f"the server could not find the requested resource in the format {MEDIA}: "
        f"{kind} has no protobuf encoding in the emulator; accept application/json",
    ).status()
    return web.Response(
        status=406, text=json.dumps(status, separators=(",", ":")), content_type="application/json"
    )


def _reencode(response: web.Response) -> web.Response:
    doc = json.loads(response.body) if isinstance(response.body, bytes) else None
    body = kproto.wrap(doc) if isinstance(doc, dict) else None
    if body is None:
        return _not_acceptable(doc)
    out = web.Response(status=response.status, body=body, content_type=MEDIA)
    for header in ("Retry-After",):
        if header in response.headers:
            out.headers[header] = response.headers[header]
    return out


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The outermost middleware: JSON answers re-encoded for clients that want only protobuf."""
    response = await handler(request)
    if (
        not wants_protobuf(request.headers.get("Accept", ""))
        or type(response) is not web.Response
        or response.content_type != "application/json"
    ):
        return response
    try:
        return _reencode(response)
    except kproto.EncodeError as err:
        status = errors.internal_error(f"the answer cannot be encoded as protobuf: {err}")
        return web.Response(
            status=500,
            text=json.dumps(status.status(), separators=(",", ":")),
            content_type="application/json",
        )
