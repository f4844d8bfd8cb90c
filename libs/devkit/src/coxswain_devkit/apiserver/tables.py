"""Server-side printing: the `Table` form kubectl asks for when it prints `get` output.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints the rows it
gets back. A custom resource gets its CRD version's printer columns (`printer`, from the
registry's `Kind`); a built-in kind NAME and AGE, the age rendered by the server as it does, and
the kinds the devkit's node and load balancer bring to life their own columns too (`columns`).
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit.apiserver import columns

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


def _row(
    obj: Obj, kind: str, printer: tuple[columns.PrinterColumn, ...], include_object: str, now: float
) -> Obj:
    meta = obj.get("metadata") or {}
    row: Obj = {"cells": columns.cells(kind, obj, lambda then: human_age(now - then), printer)}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
        }
    return row


def table(
    doc: Obj,
    *,
    include_object: str = "Metadata",
    now: float,
    printer: tuple[columns.PrinterColumn, ...] = (),
) -> Obj:
    """A Table for an object, or for a list (kept `metadata` carries resourceVersion, continue);
    `printer` are a custom resource's columns (`Kind.printer_columns`)."""
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
        "columnDefinitions": columns.definitions(kind, printer),
        "rows": [_row(o, kind, printer, include_object, now) for o in objects],
    }
