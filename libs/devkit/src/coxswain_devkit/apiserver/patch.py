"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), applied to a copy of an object.

The API server picks the algorithm from the request's Content-Type; `apply` does the same.
Strategic merge patch, which needs to know each built-in kind's list merge keys, lives in
`strategic.py`. Patches never mutate their input: handlers compare the result with the stored
object to decide what changed.
"""

from __future__ import annotations

import copy
from typing import Any

from coxswain_devkit.apiserver import errors, strategic

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2: a non-object patch replaces; null deletes a member."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise errors.bad_request(f"json patch: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], part: str, *, adding: bool) -> int:
    if adding and part == "-":
        return len(container)
    if not part.isdigit():
        raise errors.bad_request(f"json patch: invalid array index {part!r}")
    index = int(part)
    if index > len(container) or (not adding and index == len(container)):
        raise errors.bad_request(f"json patch: array index {index} out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    for token in tokens[:-1]:
        try:
            doc = doc[_index(doc, token, adding=False)] if isinstance(doc, list) else doc[token]
        except (KeyError, TypeError):
            raise errors.bad_request(f"json patch: path component {token!r} not found") from None
    return doc


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    try:
        if isinstance(parent, list):
            return parent[_index(parent, tokens[-1], adding=False)]
        return parent[tokens[-1]]
    except (KeyError, TypeError):
        raise errors.bad_request(f"json patch: {path!r} not found") from None


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    parent = _parent(doc, tokens)
    value = _get(doc, path)
    if isinstance(parent, list):
        del parent[_index(parent, tokens[-1], adding=False)]
    else:
        del parent[tokens[-1]]
    return value


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    if isinstance(parent, list):
        parent.insert(_index(parent, tokens[-1], adding=True), value)
    elif isinstance(parent, dict):
        parent[tokens[-1]] = value
    else:
        raise errors.bad_request(f"json patch: cannot add to {path!r}")
    return doc


def _operation(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op.get("op"), str(op.get("path", ""))
    if kind == "add":
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind == "remove":
        _remove(doc, path)
        return doc
    if kind == "replace":
        _get(doc, path)  # RFC 6902 section 4.3: the target location MUST exist
        if not _pointer(path):
            return copy.deepcopy(op.get("value"))
        _remove(doc, path)
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind in ("move", "copy"):
        source = str(op.get("from", ""))
        value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
        return _add(doc, path, value)
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise errors.ApiError(422, "Invalid", f"json patch: test failed at {path!r}")
        return doc
    raise errors.bad_request(f"json patch: unknown operation {kind!r}")


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise errors.bad_request("json patch: the body must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict):
            raise errors.bad_request("json patch: each operation must be an object")
        doc = _operation(doc, op)
    return doc


def apply(content_type: str, target: dict[str, Any], body: Any, *, builtin: bool) -> Any:
    """Apply the patch `body` of `content_type` to `target`, as a PATCH request would."""
    media = content_type.split(";")[0].strip()
    if media == MERGE:
        return merge_patch(target, body)
    if media == JSON:
        return json_patch(target, body)
    # kube-apiserver: strategic merge patch is not supported for custom resources (415).
    if media == STRATEGIC and builtin:
        return strategic.apply(target, body)
    raise errors.unsupported_media_type(media)
