"""HTTP: kube-apiserver's URL space on an aiohttp application.

Two middlewares wrap every request: the outer one turns `ApiError` (and any crash) into a
`Status` body with its code; the inner one applies injected faults. Discovery documents are
answered first; every other `/api` or `/apis` URL is parsed into a resource target, looked up in
the registry (404 for resources not served, e.g. a Gateway API kind without its CRD), checked
against the kind's verbs, and dispatched to the machinery, the listing, the watch stream or the
token endpoints.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import yaml
from aiohttp import web

from coxswain_devkit.apiserver import (
    discovery,
    errors,
    openapi,
    options,
    paths,
    podlogs,
    protobuf,
    scale,
    selection,
    tables,
    watch,
)
from coxswain_devkit.apiserver.access import REVIEWS, USER, Access
from coxswain_devkit.apiserver.auth import Tokens
from coxswain_devkit.apiserver.faults import Faults
from coxswain_devkit.apiserver.listing import ListOptions, list_objects
from coxswain_devkit.apiserver.machinery import Machinery
from coxswain_devkit.apiserver.paths import Target
from coxswain_devkit.apiserver.registry import Kind

log = logging.getLogger("coxswain_devkit.apiserver")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_VERBS = {
    ("GET", False): "list",
    ("POST", False): "create",
    ("DELETE", False): "deletecollection",
    ("GET", True): "get",
    ("PUT", True): "update",
    ("PATCH", True): "patch",
    ("DELETE", True): "delete",
}


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(doc, separators=(",", ":")), content_type="application/json"
    )


# The request key a handler sets to the warning its answer carries.
WARNING = web.RequestKey("coxswain_devkit.warning", str)


async def _warn(request: web.Request, response: web.StreamResponse) -> None:
    """RFC 7234 section 5.5 as the API server uses it: `Warning: 299 - "<text>"` on every answer
    at a deprecated version, watches included (headers go out before the first event)."""
    text = request.get(WARNING)
    if text:
        response.headers["Warning"] = '299 - "{}"'.format(text.replace('"', "'"))


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    # kubectl's `create <generator>` sends protobuf: read through the kinds' schema (kproto).
    if protobuf.is_protobuf(request.content_type):
        return protobuf.read_body(raw)
    if "protobuf" in request.content_type or "cbor" in request.content_type:
        raise errors.unsupported_media_type(request.content_type)
    try:
        if "yaml" in request.content_type:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as err:
        raise errors.bad_request(f"the request body is not valid JSON or YAML: {err}") from err


class Api:
    def __init__(
        self,
        machinery: Machinery,
        tokens: Tokens,
        watch_context: watch.Context,
        *,
        access: Access | None = None,
    ) -> None:
        self._machinery = machinery
        self._registry = machinery.registry
        self._tokens = tokens
        self._watch = watch_context
        self._access = access or Access(tokens, machinery.store, enforce=False)

    @property
    def faults(self) -> Faults:
        return self._watch.faults

    def application(self) -> web.Application:
        app = web.Application(
            middlewares=[self._status_middleware, self._access.middleware, self._fault_middleware]
        )
        app.on_response_prepare.append(_warn)
        app.middlewares.insert(0, protobuf.middleware)  # outermost: it sees every answer
        app.middlewares.append(options.middleware)  # innermost: per-write query options
        openapi.Documents(self._machinery).add_routes(app)
        app.router.add_get("/version", self._version)
        app.router.add_get("/version/", self._version)
        for probe in ("/healthz", "/readyz", "/livez"):
            app.router.add_get(probe, self._ok)
        app.router.add_get("/api", self._api)
        app.router.add_get("/apis", self._apis)
        app.router.add_route("*", "/api/{tail:.*}", self._resource)
        app.router.add_route("*", "/apis/{tail:.*}", self._resource)
        return app

    @web.middleware
    async def _status_middleware(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        log.debug(
            "request",
            extra={
                "fields": {
                    "method": request.method,
                    "url": str(request.rel_url),
                    "content_type": request.content_type,
                    "accept": request.headers.get("Accept", ""),
                }
            },
        )
        try:
            return await handler(request)
        except errors.ApiError as err:
            headers = {"Retry-After": "1"} if err.code == 429 else {}
            response = _json(err.status(), err.code)
            response.headers.update(headers)
            return response
        except web.HTTPException:
            raise
        except Exception as err:  # a crash must still answer like the API server
            log.exception("request failed", extra={"fields": {"path": request.path}})
            return _json(errors.internal_error(repr(err)).status(), 500)

    @web.middleware
    async def _fault_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        await self.faults.before_request()
        return await handler(request)

    async def _ok(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _version(self, _: web.Request) -> web.Response:
        return _json(discovery.VERSION_INFO)

    async def _api(self, request: web.Request) -> web.Response:
        return _json(discovery.api_versions(request.host))

    async def _apis(self, _: web.Request) -> web.Response:
        return _json(discovery.api_group_list(self._registry))

    def _discovery(self, request: web.Request) -> dict[str, Any] | None:
        segments = [s for s in request.path.split("/") if s]
        if segments == ["api"]:
            return discovery.api_versions(request.host)
        if segments == ["apis"]:
            return discovery.api_group_list(self._registry)
        if segments == ["api", "v1"]:
            return discovery.api_resource_list(self._registry, "", "v1")
        if len(segments) == 2 and segments[0] == "apis":
            return discovery.api_group(self._registry, segments[1])
        if len(segments) == 3 and segments[0] == "apis":
            return discovery.api_resource_list(self._registry, segments[1], segments[2])
        return None

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET" and len([s for s in request.path.split("/") if s]) <= 3:
            doc = self._discovery(request)
            if doc is not None:
                return _json(doc)
        target = paths.parse(request.path)
        kind = (
            None
            if target is None
            else self._registry.lookup(target.group, target.version, target.plural)
        )
        if target is None or kind is None:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        self._check_scope(target, kind, request.method)
        if kind.deprecation:
            request[WARNING] = kind.deprecation
        if target.subresource:
            return await self._subresource(request, target, kind)
        if target.name:
            return await self._object(request, target, kind)
        return await self._collection(request, target, kind)

    def _check_scope(self, target: Target, kind: Kind, method: str) -> None:
        # Only collections of a namespaced kind can be read across all namespaces; an object,
        # a create or a delete names its namespace.
        if (target.namespace is not None and not kind.namespaced) or (
            kind.namespaced and target.namespace is None and (target.name or method != "GET")
        ):
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        verb = _VERBS.get((method, bool(target.name)))
        if target.subresource:
            return
        if verb is None or (
            verb not in kind.verbs and not (verb == "list" and "watch" in kind.verbs)
        ):
            raise errors.method_not_allowed(f"{method} is not supported on {kind.plural}")

    async def _collection(
        self, request: web.Request, target: Target, kind: Kind
    ) -> web.StreamResponse:
        selector = selection.parse(
            request.query.get("labelSelector"),
            request.query.get("fieldSelector"),
            group=kind.group,
            plural=kind.plural,
        )
        if request.method == "POST":
            return await self._create(request, target, kind)
        if request.method == "DELETE":
            deleted = self._machinery.delete_collection(kind, target.namespace, selector)
            return _json(
                {
                    "kind": f"{kind.kind}List",
                    "apiVersion": kind.api_version,
                    "metadata": {},
                    "items": deleted,
                }
            )
        if _flag(request, "watch"):
            return await watch.serve(
                self._watch, self._watch_request(request, target, kind, selector), request
            )
        options = ListOptions(
            limit=int(request.query.get("limit") or 0),
            continue_token=request.query.get("continue", ""),
            resource_version=request.query.get("resourceVersion", ""),
            match=request.query.get("resourceVersionMatch", ""),
        )
        listed = list_objects(self._machinery.store, kind, target.namespace, selector, options)
        return self._maybe_table(request, listed, kind)

    def _watch_request(
        self, request: web.Request, target: Target, kind: Kind, selector: selection.Selector
    ) -> watch.WatchRequest:
        timeout = request.query.get("timeoutSeconds")
        return watch.WatchRequest(
            kind=kind,
            namespace=target.namespace,
            selector=selector,
            resource_version=request.query.get("resourceVersion", ""),
            bookmarks=_flag(request, "allowWatchBookmarks"),
            timeout=float(timeout) if timeout else watch.DEFAULT_TIMEOUT,
            table=request.query.get("includeObject", "Metadata")
            if tables.wanted(request.headers.get("Accept", ""))
            else "",
        )

    async def _create(self, request: web.Request, target: Target, kind: Kind) -> web.Response:
        body = await _body(request)
        if kind.resource == ("authentication.k8s.io", "tokenreviews"):
            return _json(self._tokens.review(body), 201)
        if kind.resource in REVIEWS:
            review = self._access.review(kind, target.namespace or "", request[USER], body)
            return _json(review, 201)
        return _json(self._machinery.create(kind, target.namespace or "", body), 201)

    async def _object(self, request: web.Request, target: Target, kind: Kind) -> web.StreamResponse:
        ns, name, m = target.namespace or "", target.name, self._machinery
        if request.method == "GET":
            return self._maybe_table(request, m.get(kind, ns, name), kind)
        if request.method == "PUT":
            return _json(m.update(kind, ns, name, await _body(request)))
        if request.method == "PATCH":
            return _json(
                m.patch(kind, ns, name, await _body(request), content_type=request.content_type)
            )
        options = await _body(request) or {}
        if "propagationPolicy" in request.query:
            options["propagationPolicy"] = request.query["propagationPolicy"]
        obj = m.delete(kind, ns, name, options)
        return _json(obj, 202 if obj["metadata"].get("deletionTimestamp") else 200)

    async def _subresource(
        self, request: web.Request, target: Target, kind: Kind
    ) -> web.StreamResponse:
        ns, name, sub, m = target.namespace or "", target.name, target.subresource, self._machinery
        if sub == "status" and kind.status:
            if request.method == "GET":
                return _json(m.get(kind, ns, name))
            if request.method == "PUT":
                return _json(m.update(kind, ns, name, await _body(request), subresource="status"))
            if request.method == "PATCH":
                body = await _body(request)
                return _json(
                    m.patch(
                        kind,
                        ns,
                        name,
                        body,
                        content_type=request.content_type,
                        subresource="status",
                    )
                )
        elif sub in kind.subresources:
            return await self._special(request, target, kind)
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")

    async def _special(
        self, request: web.Request, target: Target, kind: Kind
    ) -> web.StreamResponse:
        ns, name = target.namespace or "", target.name
        if target.subresource == "log" and request.method == "GET":
            return await podlogs.serve(
                self._machinery, self._machinery.current(kind, ns, name), request
            )
        if target.subresource == "scale" and request.method == "GET":
            return _json(scale.read(self._machinery.get(kind, ns, name)))
        if target.subresource == "scale" and request.method in ("PUT", "PATCH"):
            media = request.content_type if request.method == "PATCH" else ""
            body = await _body(request)
            return _json(scale.write(self._machinery, kind, ns, name, body, media))
        if target.subresource == "token" and request.method == "POST":
            return _json(self._tokens.request(ns, name, await _body(request)), 201)
        raise errors.method_not_allowed()

    def _maybe_table(self, request: web.Request, doc: dict[str, Any], kind: Kind) -> web.Response:
        if tables.wanted(request.headers.get("Accept", "")):
            include = request.query.get("includeObject", "Metadata")
            now, printer = self._machinery.clock(), kind.printer_columns
            return _json(tables.table(doc, include_object=include, now=now, printer=printer))
        return _json(doc)
