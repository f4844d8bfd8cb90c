"""Field validation for custom resources: what `fieldValidation` makes of an unknown field.

The OpenAPI documents tell kubectl the server validates fields (see `openapi`), so kubectl
sends `fieldValidation=Strict` and leaves unknown fields to the server, as it does against a
real cluster. For a custom resource whose CRD has a structural schema, a field the schema does
not declare is, by the directive: `Strict`, a 400 listing every such field ("strict decoding
error: unknown field "spec.foo""); `Warn` (the API server's default), a `Warning` header per
field and the field pruned; `Ignore`, pruned. `x-kubernetes-preserve-unknown-fields` keeps what
is under it (the Gateway API CRDs the devkit bundles are open this way), `additionalProperties`
types map values, `x-kubernetes-embedded-resource` allows apiVersion, kind and metadata.
`metadata` is held to ObjectMeta's fields. Built-in kinds are not validated here: the emulator
knows their fields only as far as its protobuf schema goes.
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver import errors, kproto

Obj = dict[str, Any]
_TOP = frozenset({"apiVersion", "kind", "metadata"})


def _object_meta_fields() -> frozenset[str]:
    meta = kproto.schema()["k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    return frozenset(f.name for f in meta.fields.values())


def _walk(value: Any, node: Obj, path: str, unknown: list[tuple[str, Any, str]]) -> None:
    if not isinstance(node, dict) or not node:
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, node.get("items") or {}, f"{path}[{index}]", unknown)
        return
    if not isinstance(value, dict):
        return
    properties = node.get("properties") or {}
    extra = node.get("additionalProperties")
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    for key, child in value.items():
        where = f"{path}.{key}" if path else key
        if key in properties:
            _walk(child, properties[key], where, unknown)
        elif isinstance(extra, dict):
            _walk(child, extra, where, unknown)
        elif not (preserve or extra is True or (embedded and key in _TOP)):
            unknown.append((where, value, key))


def unknown_fields(obj: Obj, schema: Obj) -> list[tuple[str, Any, str]]:
    """(JSON path, the map holding it, its key) for every field `schema` does not declare."""
    if not schema:
        return []
    found: list[tuple[str, Any, str]] = []
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        allowed = _object_meta_fields()
        found += [(f"metadata.{k}", meta, k) for k in meta if k not in allowed]
    body = {k: v for k, v in obj.items() if k not in _TOP}
    _walk(body, {**schema, "properties": {**(schema.get("properties") or {})}}, "", found)
    return [(path, holder if holder is not body else obj, key) for path, holder, key in found]


def check(obj: Obj, schema: Obj, directive: str, kind: str, version: str) -> list[str]:
    """Apply `directive` to `obj`'s unknown fields (pruning them in place unless Strict);
    the warnings to send. Strict raises 400."""
    found = unknown_fields(obj, schema)
    if not found or directive == "":
        return []
    texts = [f'unknown field "{path}"' for path, _, _ in found]
    if directive == "Strict":
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding '
            f"error: {', '.join(texts)}"
        )
    for _, holder, key in found:
        holder.pop(key, None)
    return texts if directive == "Warn" else []
