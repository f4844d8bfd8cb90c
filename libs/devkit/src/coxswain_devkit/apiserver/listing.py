"""Reads: list with selectors, at a resourceVersion, in pages with `limit` and `continue`.

A continue token carries the first page's resourceVersion and the last key served, so every page
comes from the same snapshot (the store rolls its change window back to it), as etcd's MVCC gives
the real server. A token older than the window is answered with 410 Expired, as there.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from coxswain_devkit.apiserver import errors
from coxswain_devkit.apiserver.registry import Kind
from coxswain_devkit.apiserver.selection import Selector
from coxswain_devkit.apiserver.store import Expired, Obj, Store


@dataclass(frozen=True, slots=True)
class ListOptions:
    limit: int = 0  # at most this many items per page; 0 for all
    continue_token: str = ""  # the previous page's `metadata.continue`
    resource_version: str = ""  # "" (latest), "0" (any), or a resourceVersion
    match: str = ""  # resourceVersionMatch: "", "NotOlderThan" or "Exact"


def present(kind: Kind, obj: Obj) -> Obj:
    """An object as served at `kind`'s version: every version shares one stored form."""
    return {**obj, "apiVersion": kind.api_version, "kind": kind.kind}


def _encode(rv: int, start: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "start": list(start)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise errors.bad_request(f"continue key is not valid: {token!r}") from None


def _snapshot_rv(store: Store, options: ListOptions) -> int | None:
    """The resourceVersion to read at, or None for the latest state."""
    if options.resource_version in ("", "0"):
        return None
    try:
        rv = int(options.resource_version)
    except ValueError:
        raise errors.bad_request(f"invalid resourceVersion {options.resource_version!r}") from None
    if rv > store.resource_version:
        raise errors.ApiError(
            504, "Timeout", f"Too large resource version: {rv}, current: {store.resource_version}"
        )
    return rv if options.match == "Exact" else None


def list_objects(
    store: Store, kind: Kind, namespace: str | None, selector: Selector, options: ListOptions
) -> Obj:
    start: tuple[str, str] = ("", "")
    if options.continue_token:
        rv, start = _decode(options.continue_token)
    else:
        rv = _snapshot_rv(store, options) or store.resource_version
    try:
        objects = (
            store.items(kind.resource, namespace)
            if rv == store.resource_version
            else store.snapshot(kind.resource, namespace, rv)
        )
    except Expired:
        raise errors.expired(
            "The provided continue parameter is too old to display a consistent list result. "
            "You can start a new list without the continue parameter."
        ) from None
    return _page(kind, rv, _after(objects, start), selector, options.limit)


def _ident(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


def _after(objects: list[Obj], start: tuple[str, str]) -> list[Obj]:
    return [o for o in objects if _ident(o) > start] if start != ("", "") else objects


def _page(kind: Kind, rv: int, objects: list[Obj], selector: Selector, limit: int) -> Obj:
    matching = [o for o in objects if selector.matches(o)]
    page = matching[:limit] if limit > 0 else matching
    metadata: dict[str, Any] = {"resourceVersion": str(rv)}
    if len(page) < len(matching):
        metadata["continue"] = _encode(rv, _ident(page[-1]))
        metadata["remainingItemCount"] = len(matching) - len(page)
    return {
        "kind": f"{kind.kind}List",
        "apiVersion": kind.api_version,
        "metadata": metadata,
        "items": [present(kind, o) for o in page],
    }
