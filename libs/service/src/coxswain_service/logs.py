"""Structured logs: one JSON object per line on stderr, so log pipelines need no parsing rules.

Callers attach fields with `extra={"fields": {...}}`; they land as top-level keys. `parse_line`
is the reverse, used by the devkit to wait on a service's lines. `quote` bounds what a line
repeats of a value a client sent, so a client cannot fill the logs or forge lines.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "configure", "parse_line", "quote", "LEVELS", "QUOTE_LIMIT"]

# The --log-level choices every service offers.
LEVELS = ("debug", "info", "warning")
# How many characters of a client's value a log line repeats, at most.
QUOTE_LIMIT = 128


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(service: str, level: str) -> None:
    """Send every logger's records to stderr as JSON lines naming `service`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def parse_line(text: str) -> dict[str, Any]:
    """One line a service wrote, as its fields; a line that is not a JSON object is `{"raw": text}`
    (a traceback printed before logging was configured, say)."""
    try:
        line = json.loads(text)
    except ValueError:
        return {"raw": text}
    return line if isinstance(line, dict) else {"raw": text}


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`value` as a log line may repeat it: printable (repr-escaped) and at most `limit` characters
    of the original, with how much was cut."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value[: limit + 1]).decode("utf-8", errors="backslashreplace")
    text = value if isinstance(value, str) else repr(value)
    cut = len(text) - limit
    shown = text[:limit]
    if not shown.isprintable():
        shown = repr(shown)[1:-1]
    return f"{shown}...(+{cut} chars)" if cut > 0 else shown
