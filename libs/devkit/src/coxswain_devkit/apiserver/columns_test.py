"""Printer columns: a CRD version's `additionalPrinterColumns` as Table columns and cells.

Covers reading the columns from a CRD version (and the Age column the API server defaults when
there are none), the column definitions (NAME first, then the CRD's in order with type,
priority and format), each cell type as apiextensions converts it (string as JSONPath prints
it, integer, number, boolean, date as an age, `<invalid>` for a date that is not one, and an
empty cell for a value of another type or a path that finds nothing or does not parse), the
first value of several, and that the bundled Gateway API CRDs carry upstream's columns. Built-in
kinds' columns and kubectl printing are in printer_columns_kubectl_test.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import columns
from coxswain_devkit.apiserver.columns import PrinterColumn
from coxswain_devkit.apiserver.registry import crd_kinds

OBJ: dict[str, Any] = {
    "metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"replicas": 3, "ratio": 0.5, "paused": False, "hosts": ["a", "b"], "at": "nope"},
    "status": {"addresses": [{"value": "10.0.0.7"}, {"value": "10.0.0.8"}]},
}


def _age(then: float) -> str:
    return f"age-of-{int(then)}"


@pytest.mark.parametrize(
    ("column", "cell"),
    [
        pytest.param(PrinterColumn("R", "integer", ".spec.replicas"), 3, id="integer"),
        pytest.param(PrinterColumn("R", "number", ".spec.replicas"), 3.0, id="integer-as-number"),
        pytest.param(PrinterColumn("R", "number", ".spec.ratio"), 0.5, id="number"),
        pytest.param(PrinterColumn("P", "boolean", ".spec.paused"), False, id="boolean"),
        pytest.param(PrinterColumn("R", "string", ".spec.replicas"), "3", id="number-as-string"),
        pytest.param(PrinterColumn("H", "string", ".spec.hosts"), '["a","b"]', id="list-as-json"),
        pytest.param(
            PrinterColumn("A", "string", ".status.addresses[*].value"), "10.0.0.7", id="first-value"
        ),
        pytest.param(
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
            "age-of-1767225600",
            id="date-as-age",
        ),
        pytest.param(PrinterColumn("At", "date", ".spec.at"), "<invalid>", id="date-not-a-date"),
        pytest.param(PrinterColumn("R", "integer", ".spec.hosts"), None, id="wrong-type-is-empty"),
        pytest.param(PrinterColumn("B", "boolean", ".spec.replicas"), None, id="number-not-bool"),
        pytest.param(PrinterColumn("M", "string", ".spec.missing"), None, id="nothing-found"),
        pytest.param(PrinterColumn("M", "string", ".spec["), None, id="bad-path-is-empty"),
    ],
)
def test_cells(column: PrinterColumn, cell: Any) -> None:
    assert columns.cells("Thing", OBJ, _age, (column,)) == ["x", cell]


def test_columns_come_from_the_crd_version() -> None:
    version = {
        "name": "v1",
        "additionalPrinterColumns": [
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {
                "name": "Size",
                "type": "integer",
                "jsonPath": ".spec.size",
                "format": "int64",
                "priority": 1,
                "description": "how big",
            },
        ],
    }
    printer = columns.printer_columns(version)
    assert printer == (
        PrinterColumn("Replicas", "integer", ".spec.replicas"),
        PrinterColumn("Size", "integer", ".spec.size", "how big", 1, "int64"),
    )
    assert [
        (c["name"], c["type"], c["priority"], c["format"])
        for c in columns.definitions("Thing", printer)
    ] == [
        ("Name", "string", 0, "name"),
        ("Replicas", "integer", 0, ""),
        ("Size", "integer", 1, "int64"),
    ]


def test_a_version_without_columns_gets_age() -> None:
    assert columns.printer_columns({"name": "v1"}) == columns.DEFAULT_COLUMNS
    assert columns.cells("Thing", OBJ, _age, columns.DEFAULT_COLUMNS) == ["x", "age-of-1767225600"]


def _headers(channel: list[dict[str, Any]], kind: str) -> dict[str, list[str]]:
    crd = next(c for c in channel if c["spec"]["names"]["kind"] == kind)
    return {k.version: [c.name for c in k.printer_columns] for k in crd_kinds(crd)}


@pytest.mark.parametrize(
    ("kind", "headers"),
    [
        pytest.param("Gateway", ["Class", "Address", "Programmed", "Age"], id="gateway"),
        pytest.param(
            "GatewayClass", ["Controller", "Accepted", "Age", "Description"], id="gatewayclass"
        ),
        pytest.param("HTTPRoute", ["Hostnames", "Age"], id="httproute"),
        pytest.param("GRPCRoute", ["Hostnames", "Age"], id="grpcroute"),
        pytest.param("ListenerSet", ["Accepted", "Programmed", "Age"], id="listenerset"),
        pytest.param("ReferenceGrant", ["Age"], id="referencegrant"),
        pytest.param("TCPRoute", ["Age"], id="tcproute"),
    ],
)
def test_bundled_crds_carry_upstreams_columns(kind: str, headers: list[str]) -> None:
    for channel in (crds.standard(), crds.experimental()):
        served = _headers(channel, kind)
        assert served and all(h == headers for h in served.values()), served
