"""A CORS rule's fields on a forwarded response: the gateway's policy replaces the upstream's.

Where it sits: `dispatch` decides the fields a response of a rule with a CORS filter gets
(`RequestCycle.cors`: Vary, and the Access-Control-* fields for an allowed origin); `heads`
calls `add` when it writes the response head, after the upstream's fields. Only responses of
such rules pay for it.

Why the upstream's Access-Control-* fields go: the route declares the CORS policy, and the
gateway answers it ("no CORS headers for a disallowed origin"); a second
Access-Control-Allow-Origin from the backend would make the browser refuse the response, and
one for an origin the policy refuses would let it through. Vary is added beside the upstream's
own (its lines combine).

HTTPCORSFilter.exposeHeaders: "The `Access-Control-Expose-Headers` response header can only
use `*` wildcard as value when the `AllowCredentials` field is false or omitted". With
credentials, `dispatch` puts `RESPONSE_FIELD_NAMES` as the value and `add` writes the names of
the fields the response carries in its place.
"""

from __future__ import annotations

__all__ = ["EXPOSE_HEADERS", "RESPONSE_FIELD_NAMES", "add"]

EXPOSE_HEADERS = b"access-control-expose-headers"
# Never a field value (NUL is not allowed in one): stands for the response's field names.
RESPONSE_FIELD_NAMES = b"\x00names"
_PREFIX = b"access-control-"
_VARY = b"vary"


def add(out: list[bytes], start: int, extra: list[tuple[bytes, bytes]]) -> None:
    """Replace the Access-Control-* fields among `out[start:]` (name, ": ", value, CRLF
    groups) with `extra`'s, and append the rest of `extra`. Only a CORS rule's fields (its
    Vary) replace any: a policy's own (an affinity cookie) are only added."""
    cors = any(name.lower() == _VARY for name, _ in extra)
    i = start
    while cors and i < len(out):
        if out[i][:15].lower() == _PREFIX:
            del out[i : i + 4]
        else:
            i += 4
    # The response's own names, taken before any of `extra` joins them.
    names = _names(out, start) if any(v == RESPONSE_FIELD_NAMES for _, v in extra) else b""
    for name, value in extra:
        if value == RESPONSE_FIELD_NAMES:
            if not names:
                continue
            value = names
        out += (name, b": ", value, b"\r\n")


def _names(out: list[bytes], start: int) -> bytes:
    seen: dict[bytes, bytes] = {}
    for name in out[start::4]:
        seen.setdefault(name.lower(), name)
    return b", ".join(seen.values())
