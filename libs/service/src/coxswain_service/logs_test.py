"""Structured log lines: the fields each line carries, `parse_line` reading them back, and
`quote` bounding what a line repeats of a client's value."""

from __future__ import annotations

import json
import logging

import pytest

from coxswain_service import logs


def _record(msg: str, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("coxswain.test", logging.WARNING, __file__, 1, msg, None, None)
    record.fields = fields
    return record


def test_a_line_is_one_json_object_with_the_fields_on_top() -> None:
    line = logs.JsonFormatter("proxy").format(_record("snapshot applied", version="v1", ms=3))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["service"] == "proxy"
    assert entry["level"] == "warning"
    assert entry["logger"] == "coxswain.test"
    assert entry["msg"] == "snapshot applied"
    assert (entry["version"], entry["ms"]) == ("v1", 3)
    assert entry["ts"].endswith("+00:00")


def test_parse_line_reads_back_what_the_formatter_wrote() -> None:
    line = logs.JsonFormatter("ui").format(_record("admin server listening", port=8080))
    assert logs.parse_line(line)["port"] == 8080


@pytest.mark.parametrize(
    "text", ["Traceback (most recent call last):", "[1, 2]", ""], ids=["text", "array", "empty"]
)
def test_parse_line_keeps_what_is_not_an_object_as_raw(text: str) -> None:
    assert logs.parse_line(text) == {"raw": text}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("node-a", "node-a", id="short-text-as-is"),
        pytest.param("a\r\nforged line", "a\\r\\nforged line", id="control-chars-escaped"),
        pytest.param(b"\xffab", "\\xffab", id="bytes-decoded-with-escapes"),
        pytest.param(12, "12", id="non-text-as-repr"),
        pytest.param("x" * 130, "x" * 128 + "...(+2 chars)", id="long-value-cut"),
    ],
)
def test_quote_bounds_and_escapes_client_values(value: object, expected: str) -> None:
    assert logs.quote(value) == expected


def test_quote_of_a_huge_value_stays_small() -> None:
    assert len(logs.quote("n" * 3 * 1024 * 1024)) < 160
