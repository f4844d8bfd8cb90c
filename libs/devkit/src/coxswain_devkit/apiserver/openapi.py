"""OpenAPI documents: what kubectl reads before it writes, so `kubectl apply` validates as usual.

kubectl's validation (`--validate=strict`, its default) first asks `/openapi/v3` for the list of
group-version documents, then the document of the object's group and version, and looks in it
for the PATCH operation of the object's kind (`x-kubernetes-group-version-kind`) taking a
`fieldValidation` query parameter: when it is there, validation is left to the server (kubectl
sends `fieldValidation=Strict`) instead of being done against the schema on the client. These
documents say so for every served kind, built-in or custom, and carry each kind's schema under
`components.schemas` (built-in kinds from the protobuf schema in `kproto`, custom resources
from their CRD's `openAPIV3Schema`), which is what `kubectl explain` prints.

PATCH operations list the apply, JSON and merge patch bodies but not strategic merge patch:
kubectl then computes a client-side apply's strategic patch from the types it is built with,
as it does against servers without these documents, instead of from patch metadata these
schemas do not carry. `/openapi/v2` is served as JSON only (Swagger 2.0, `definitions`);
clients that ask for its protobuf form get 406, and kubectl does not need it once v3 answers.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from aiohttp import web

from coxswain_devkit.apiserver import kproto
from coxswain_devkit.apiserver.kproto import _decode as wire
from coxswain_devkit.apiserver.kproto._schema import Field, Message
from coxswain_devkit.apiserver.machinery import CRDS, Machinery
from coxswain_devkit.apiserver.registry import Kind, Registry

Obj = dict[str, Any]
_META = "io.k8s.apimachinery.pkg.apis.meta.v1"
OBJECT_META = f"{_META}.ObjectMeta"
_PATCH_BODIES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
)
_SCALARS: dict[str, Obj] = {
    "string": {"type": "string"},
    "bytes": {"type": "string", "format": "byte"},
    "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "uint32": {"type": "integer", "format": "int32"},
    "uint64": {"type": "integer", "format": "int64"},
    "double": {"type": "number", "format": "double"},
    "float": {"type": "number", "format": "float"},
}
_SPECIAL: dict[str, Obj] = {
    wire.TIME: {"type": "string", "format": "date-time"},
    wire.MICRO_TIME: {"type": "string", "format": "date-time"},
    wire.DURATION: {"type": "string"},
    wire.QUANTITY: {"type": "string", "x-kubernetes-int-or-string": True},
    wire.INT_OR_STRING: {"type": "string", "format": "int-or-string",
                         "x-kubernetes-int-or-string": True},
    wire.FIELDS_V1: {"type": "object"},
    wire.RAW_EXTENSION: {"type": "object"},
    wire.EXTRA_VALUE: {"type": "array", "items": {"type": "string"}},
}  # fmt: skip


def component_name(proto_name: str) -> str:
    """k8s.io.api.core.v1.Pod -> io.k8s.api.core.v1.Pod, as the API server names schemas."""
    return "io.k8s." + proto_name.removeprefix("k8s.io.")


def _reverse_group(group: str) -> str:
    return ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"


def _gvk(kind: Kind) -> Obj:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


# --- schemas ---------------------------------------------------------------------------------


class _Schemas:
    """Component schemas collected for one document, referenced as `prefix + name`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.components: dict[str, Obj] = {}

    def ref(self, name: str) -> Obj:
        return {"$ref": f"{self.prefix}{name}"}

    def message(self, proto_name: str) -> Obj:
        """A $ref to the message's component, added (with what it references) if missing."""
        special = _SPECIAL.get(proto_name)
        if special is not None:
            return dict(special)
        name = component_name(proto_name)
        if name not in self.components:
            self.components[name] = {}  # reserved first: messages refer to themselves
            self.components[name] = self._object(kproto.schema()[proto_name])
        return self.ref(name)

    def _object(self, msg: Message) -> Obj:
        properties: Obj = {}
        for f in sorted(msg.fields.values(), key=lambda f: f.number):
            if f.inline:
                inner = self._object(kproto.schema()[f.type])
                properties.update(inner.get("properties", {}))
            else:
                properties[f.name] = self._field(f)
        return {"type": "object", "properties": properties}

    def _field(self, f: Field) -> Obj:
        base = self.message(f.type) if f.is_message else dict(_SCALARS[f.type])
        if f.map_key:
            return {"type": "object", "additionalProperties": base}
        if f.repeated:
            return {"type": "array", "items": base}
        return base

    def builtin_kind(self, kind: Kind) -> str | None:
        proto_name = kproto.message_for(kind.api_version, kind.kind)
        if proto_name is None:
            return None
        self.message(proto_name)
        name = component_name(proto_name)
        self._typed(name, kind)
        return name

    def custom_kind(self, kind: Kind, crd_schema: Obj) -> str:
        name = f"{_reverse_group(kind.group)}.{kind.version}.{kind.kind}"
        schema = json.loads(json.dumps(crd_schema or {"type": "object"}))
        properties = schema.setdefault("properties", {})
        properties["metadata"] = self.message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        self.components[name] = schema
        self._typed(name, kind)
        return name

    def _typed(self, name: str, kind: Kind) -> None:
        schema = self.components[name]
        properties = schema.setdefault("properties", {})
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        schema["x-kubernetes-group-version-kind"] = [_gvk(kind)]


# --- paths -----------------------------------------------------------------------------------


def _query(*names: str) -> list[Obj]:
    return [
        {"name": n, "in": "query", "schema": {"type": "boolean" if n == "force" else "string"}}
        for n in names
    ]


def _operation(kind: Kind, action: str, ref: Obj, *, body: tuple[str, ...] = ()) -> Obj:
    op: Obj = {
        "operationId": f"{action}{kind.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(kind),
        "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
    }
    if action in ("post", "put"):
        op["parameters"] = _query("dryRun", "fieldManager", "fieldValidation")
    if action == "patch":
        op["parameters"] = _query("dryRun", "fieldManager", "fieldValidation", "force")
    if body:
        op["requestBody"] = {"content": {media: {"schema": ref} for media in body}}
    return op


def _base(kind: Kind) -> str:
    root = f"/apis/{kind.group}/{kind.version}" if kind.group else "/api/v1"
    scope = "/namespaces/{namespace}" if kind.namespaced else ""
    return f"{root}{scope}/{kind.plural}"


def _paths(kind: Kind, ref: Obj) -> dict[str, Obj]:
    collection, item = _base(kind), _base(kind) + "/{name}"
    patch_ref = {"type": "object"}
    paths: dict[str, Obj] = {collection: {}, item: {}}
    verbs = set(kind.verbs)
    if "list" in verbs:
        paths[collection]["get"] = _operation(kind, "list", ref)
    if "create" in verbs:
        paths[collection]["post"] = _operation(kind, "post", ref, body=("application/json",))
    if "get" in verbs:
        paths[item]["get"] = _operation(kind, "get", ref)
    if "update" in verbs:
        paths[item]["put"] = _operation(kind, "put", ref, body=("application/json",))
    if "patch" in verbs:
        paths[item]["patch"] = _operation(kind, "patch", patch_ref, body=_PATCH_BODIES)
    if "delete" in verbs:
        paths[item]["delete"] = _operation(kind, "delete", ref)
    if kind.status:
        paths[f"{item}/status"] = {
            "get": _operation(kind, "get", ref),
            "put": _operation(kind, "put", ref, body=("application/json",)),
            "patch": _operation(kind, "patch", patch_ref, body=_PATCH_BODIES),
        }
    return {p: ops for p, ops in paths.items() if ops}


# --- documents -------------------------------------------------------------------------------


def _crd_schema(registry: Registry, crds: dict[str, Obj], kind: Kind) -> Obj:
    crd = crds.get(registry.owner_of(kind.group, kind.plural) or "") or {}
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == kind.version:
            return dict(((version.get("schema") or {}).get("openAPIV3Schema")) or {})
    return {}


def _documents(
    registry: Registry, crds: dict[str, Obj], schemas: _Schemas, kinds: list[Kind]
) -> dict[str, Obj]:
    paths: dict[str, Obj] = {}
    for kind in sorted(kinds, key=lambda k: k.plural):
        name = (
            schemas.builtin_kind(kind)
            if kind.builtin
            else schemas.custom_kind(kind, _crd_schema(registry, crds, kind))
        )
        ref = schemas.ref(name) if name else {"type": "object"}
        paths.update(_paths(kind, ref))
    return paths


def group_version_doc(registry: Registry, crds: dict[str, Obj], group: str, version: str) -> Obj:
    """The OpenAPI 3.0 document of one group version, as /openapi/v3/apis/<g>/<v> serves it."""
    schemas = _Schemas("#/components/schemas/")
    paths = _documents(registry, crds, schemas, registry.in_group_version(group, version))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-coxswain-devkit"},
        "paths": paths,
        "components": {"schemas": schemas.components},
    }


def swagger(registry: Registry, crds: dict[str, Obj]) -> Obj:
    """Every served kind in one Swagger 2.0 document, as /openapi/v2 serves it in JSON."""
    schemas = _Schemas("#/definitions/")
    paths = _documents(registry, crds, schemas, list(registry.kinds()))
    for ops in paths.values():
        for op in ops.values():
            op.pop("requestBody", None)
            schema = op["responses"]["200"]["content"]["application/json"]["schema"]
            op["responses"] = {"200": {"description": "OK", "schema": schema}}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-coxswain-devkit"},
        "paths": paths,
        "definitions": schemas.components,
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _digest(doc: Obj) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()


class Documents:
    """The routes: /openapi/v3, /openapi/v3/<group version path>, /openapi/v2."""

    def __init__(self, machinery: Machinery) -> None:
        self._registry = machinery.registry
        self._store = machinery.store

    def _crds(self) -> dict[str, Obj]:
        return {crd["metadata"]["name"]: crd for crd in self._store.items(CRDS)}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/openapi/v3", self._root)
        app.router.add_get("/openapi/v3/{path:.+}", self._group_version)
        app.router.add_get("/openapi/v2", self._v2)

    def _doc(self, group: str, version: str) -> Obj:
        return group_version_doc(self._registry, self._crds(), group, version)

    async def _root(self, _: web.Request) -> web.Response:
        paths = {}
        for group, versions in sorted(self._registry.groups().items()):
            for version in versions:
                path = _gv_path(group, version)
                url = f"/openapi/v3/{path}?hash={_digest(self._doc(group, version))}"
                paths[path] = {"serverRelativeURL": url}
        return _json({"paths": paths})

    async def _group_version(self, request: web.Request) -> web.Response:
        segments = request.match_info["path"].strip("/").split("/")
        if segments[:1] == ["api"] and len(segments) == 2:
            group, version = "", segments[1]
        elif segments[:1] == ["apis"] and len(segments) == 3:
            group, version = segments[1], segments[2]
        else:
            return _not_found()
        if not self._registry.in_group_version(group, version):
            return _not_found()
        response = _json(self._doc(group, version))
        if request.query.get("hash"):
            response.headers["Cache-Control"] = "public, immutable"
        return response

    async def _v2(self, request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept and "json" not in accept and "*/*" not in accept:
            return web.Response(
                status=406,
                text="the emulator serves /openapi/v2 as JSON only; kubectl asks it for a kind "
                "/openapi/v3 does not list, which is a kind the emulator does not serve",
            )
        return _json(swagger(self._registry, self._crds()))


def _json(doc: Obj) -> web.Response:
    return web.Response(
        text=json.dumps(doc, separators=(",", ":")), content_type="application/json"
    )


def _not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found")
