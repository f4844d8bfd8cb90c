"""The query options every write carries: field manager, force, dry run and field validation.

The API server takes them from the URL of any create, update, patch or delete, and they reach
deep into the write path: the field manager names who owns what in `managedFields`, `force`
lets a server-side apply take fields another manager owns, `dryRun=All` runs a write without
storing it, `fieldValidation` says what an unknown field in a body is worth. A middleware
parses them once per request into a context variable the machinery reads, so every write path
(the handlers, the scale subresource, token requests) sees the same options without each
passing them along; writes made outside a request (seeding, the garbage collector) see the
defaults: no manager, no validation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from aiohttp import web

from coxswain_devkit.apiserver import errors

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MAX_MANAGER = 128  # "must be less than or 128 characters long"
VALIDATIONS = ("Ignore", "Warn", "Strict")


@dataclass(frozen=True, slots=True)
class WriteOptions:
    manager: str = ""  # fieldManager, else the User-Agent's product ("kubectl"); "" outside HTTP
    manager_given: bool = False  # whether the request named its field manager
    force: bool = False  # apply: take the fields other managers own
    dry_run: bool = False  # dryRun=All: answer as if written, store nothing
    validation: str = ""  # fieldValidation: Ignore, Warn, Strict; "" outside HTTP
    warnings: list[str] = field(default_factory=list)  # what the answer's Warning headers say


_current: ContextVar[WriteOptions | None] = ContextVar(
    "coxswain_devkit.apiserver.write_options", default=None
)


def current() -> WriteOptions:
    """The options of the request being served; the defaults (afresh) outside any request."""
    return _current.get() or WriteOptions()


def _manager(request: web.Request) -> tuple[str, bool]:
    given = request.query.get("fieldManager")
    if given is not None:
        if not given or len(given) > MAX_MANAGER or not given.isprintable():
            raise errors.bad_request(
                "fieldManager must be non-empty, at most 128 characters, and printable"
            )
        return given, True
    agent = request.headers.get("User-Agent", "")
    # The API server's default: the User-Agent up to its first "/", e.g. "kubectl".
    return (agent.split("/")[0].strip() or "unknown")[:MAX_MANAGER], False


def from_request(request: web.Request) -> WriteOptions:
    manager, given = _manager(request)
    dry_run = request.query.getall("dryRun", [])
    if any(v != "All" for v in dry_run):
        raise errors.bad_request(f"unsupported dryRun value {dry_run}: only 'All' is")
    validation = request.query.get("fieldValidation", "Warn")
    if validation not in VALIDATIONS:
        raise errors.bad_request(
            f'invalid fieldValidation directive "{validation}": must be Ignore, Warn or Strict'
        )
    force = request.query.get("force", "").lower() in ("true", "1")
    return WriteOptions(manager, given, force, bool(dry_run), validation)


@contextlib.contextmanager
def using(opts: WriteOptions) -> Iterator[WriteOptions]:
    """Run writes with `opts` (tests, and the middleware)."""
    token = _current.set(opts)
    try:
        yield opts
    finally:
        _current.reset(token)


def warning_header(text: str) -> str:
    """RFC 7234 section 5.5's warn-text is a quoted-string: quotes and backslashes escaped."""
    return '299 - "{}"'.format(text.replace("\\", "\\\\").replace('"', '\\"'))


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return await handler(request)
    with using(from_request(request)) as opts:
        response = await handler(request)
    for text in opts.warnings:
        response.headers.add("Warning", warning_header(text))
    return response
