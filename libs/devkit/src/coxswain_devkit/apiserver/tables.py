"""Server-side printing: the `Table` form kubectl asks for when it prints `get` output.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints the rows it
gets back. Every kind here gets the columns the real server gives custom resources without
`additionalPrinterColumns`: NAME and AGE, the age rendered by the server as it does; the kinds
the devkit's node and load balancer bring to life get their own columns too (`columns`).
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver import columns
from coxswain_devkit.apiserver.meta import parse_timestamp

Obj = dict[str, Any]


def human_age(seconds: float) -> str:
    """apimachinery's HumanDuration, coarsened: 42s, 5m, 3h, 12d."""
    seconds = max(int(seconds), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def wanted(accept: str) -> bool:
    return "as=Table" in accept.replace(" ", "")


def _row(obj: Obj, kind: str, *, include_object: str, now: float) -> Obj:
    meta = obj.get("metadata") or {}
    created = meta.get("creationTimestamp")
    age = human_age(now - parse_timestamp(created)) if created else "<unknown>"
    row: Obj = {"cells": columns.cells(kind, obj, age)}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
        }
    return row


def table(doc: Obj, *, include_object: str = "Metadata", now: float) -> Obj:
    """A Table for an object, or for a list (kept `metadata` carries resourceVersion, continue)."""
    is_list = "items" in doc
    objects = doc["items"] if is_list else [doc]
    metadata = (
        doc.get("metadata", {})
        if is_list
        else {"resourceVersion": doc["metadata"].get("resourceVersion", "")}
    )
    kind = str(doc.get("kind", "")).removesuffix("List") if is_list else str(doc.get("kind", ""))
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns.definitions(kind),
        "rows": [_row(o, kind, include_object=include_object, now=now) for o in objects],
    }
