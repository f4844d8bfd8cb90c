"""RBAC as the API server applies it, for checking the chart's roles against real requests.

`request_info` turns one request (method, path, query) into the attributes the API server
authorises (Kubernetes "Authorization" / "Determine the request verb": GET of a collection is
`list`, or `watch` with `watch=true`; POST `create`; PUT `update`; PATCH `patch`; DELETE
`delete`, or `deletecollection` on a collection; a list or watch with the field selector
`metadata.name=X` is matched against resourceNames as X). Discovery paths (`/api`, `/apis/...`
without a resource) are not resource requests and get None: every authenticated user may read
them (the `system:discovery` role). `Roles.allows` answers whether any rule of the ClusterRoles,
or of the Roles of the request's namespace, grants it (apiGroups, resources with
`resource/subresource`, verbs, and resourceNames, each with `*`).

`RecordingProxy` stands between a client and the devkit API emulator and keeps every request it
forwards, streaming answers (watches) through as they come.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Request:
    verb: str
    group: str  # "" for the core group
    resource: str
    subresource: str = ""
    namespace: str = ""  # "" for cluster-scoped requests (and all-namespace lists)
    name: str = ""  # "" for collections, and for create

    @property
    def full_resource(self) -> str:
        """`resource` or `resource/subresource`, as RBAC rules name it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def __str__(self) -> str:
        resource = self.full_resource
        group = self.group or "core"
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {group}/{resource}{named}{where}"


def request_info(method: str, path: str, query: Mapping[str, Sequence[str]]) -> Request | None:
    """The authorisation attributes of a request; None for a non-resource (discovery) one."""
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) == 2:
        namespace = rest[1]  # the Namespace object itself
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _verb(method, named=bool(name), watch=_first(query, "watch") in ("true", "1"))
    if not name and verb in ("list", "watch"):
        name = _named_by_field(_first(query, "fieldSelector"))
    return Request(verb, group, resource, subresource, namespace, name)


def _first(query: Mapping[str, Sequence[str]], key: str) -> str:
    values = query.get(key) or [""]
    return values[0]


def _verb(method: str, *, named: bool, watch: bool) -> str:
    if method == "GET":
        return "get" if named else ("watch" if watch else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
    return verbs[method]


def _named_by_field(selector: str) -> str:
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if key.strip() == "metadata.name":
            return value.strip()
    return ""


def _rule_allows(rule: Obj, request: Request) -> bool:
    groups = rule.get("apiGroups") or []
    if request.group not in groups and "*" not in groups:
        return False
    verbs = rule.get("verbs") or []
    if request.verb not in verbs and "*" not in verbs:
        return False
    resources = rule.get("resources") or []
    if request.subresource:
        wanted = {f"{request.resource}/{request.subresource}", f"*/{request.subresource}", "*"}
    else:
        wanted = {request.resource, "*"}
    if not wanted & set(resources):
        return False
    names = rule.get("resourceNames")
    return not names or request.name in names


@dataclass(frozen=True)
class Roles:
    cluster_rules: tuple[Obj, ...]  # every rule of the ClusterRoles bound
    namespaced_rules: tuple[tuple[str, Obj], ...]  # (namespace, rule) of the Roles bound

    @classmethod
    def of(cls, cluster_roles: Iterable[Obj], roles: Iterable[Obj]) -> Roles:
        return cls(
            tuple(rule for role in cluster_roles for rule in role.get("rules") or []),
            tuple(
                (role["metadata"]["namespace"], rule)
                for role in roles
                for rule in role.get("rules") or []
            ),
        )

    def allows(self, request: Request) -> bool:
        if any(_rule_allows(rule, request) for rule in self.cluster_rules):
            return True
        return any(
            namespace == request.namespace and _rule_allows(rule, request)
            for namespace, rule in self.namespaced_rules
        )

    def granted(self) -> set[tuple[str, str, str]]:
        """Every (group, resource[/subresource], verb) any rule names."""
        rules = [*self.cluster_rules, *(rule for _, rule in self.namespaced_rules)]
        return {
            (group, resource, verb)
            for rule in rules
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }


# Headers that describe one hop, not the message (RFC 9110 section 7.6.1), and the body's
# framing, which the proxy redoes.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "te", "upgrade"}


class RecordingProxy:
    """An HTTP reverse proxy in front of `upstream` (host, port) that keeps every request."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.requests: list[tuple[str, str, dict[str, list[str]], int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._forward(self, upstream)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads `requests`, not a log

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def recorded(self) -> list[tuple[str, str, dict[str, list[str]], int]]:
        with self._lock:
            return list(self.requests)

    def _forward(self, handler: http.server.BaseHTTPRequestHandler, upstream: Any) -> None:
        url = urllib.parse.urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        connection = http.client.HTTPConnection(*upstream)
        try:
            connection.request(handler.command, handler.path, body=body, headers=headers)
            answer = connection.getresponse()
            with self._lock:
                query = urllib.parse.parse_qs(url.query)
                self.requests.append((handler.command, url.path, query, answer.status))
            handler.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP:
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while chunk := answer.read1(65536):
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True  # the client or the emulator went away
        finally:
            connection.close()
