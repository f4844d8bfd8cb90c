"""The answers a policy gives itself (403, 413, 429, 401, a sign-in redirect), in one write.

Where it sits: every stage of `gate` that refuses a request answers through `refuse`, which
adds what the rule's CORS filter asked of responses (`PolicedCycle.cors`), as a redirect or a
preflight answer of `dispatch` does, so a browser can read why it was refused.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from coxswain_proxy.dataplane.http import responses

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle

__all__ = ["refuse"]

_TEXT = ("content-type", "text/plain; charset=utf-8")


def refuse(
    cycle: PolicedCycle, status: int, reason: str, headers: list[tuple[str, str]] | None = None
) -> None:
    """Answer `status` with a short text body saying `reason`, and `headers`."""
    fields = [_TEXT, *(headers or ())]
    fields += [(n.decode("latin-1"), v.decode("latin-1")) for n, v in cycle.cors]
    body = f"{status} {HTTPStatus(status).phrase}: {reason}\n".encode()
    data = responses.with_headers(status, fields, close=cycle.must_close(), body=body)
    cycle.answer(status, data)
