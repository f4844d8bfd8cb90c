"""A reason a value cannot be served, naming its field: what every model's `validate` returns."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a value cannot be served, naming the field at fault."""

    field: str  # dotted path to the offending field, e.g. "matches[0].path.value"
    message: str
