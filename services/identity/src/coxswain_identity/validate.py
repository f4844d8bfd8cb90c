"""IssueSvid's boundary: the request's two fields, checked before anything uses them.

Where it sits: `coxswain_proto.rpc` has already refused bytes that are not a well-formed
IssueSvidRequest (a field of the wrong wire type, a token that is not UTF-8, a truncated
length), so what arrives here is typed; `request` checks what the types cannot say: presence,
length and character set. It runs first in `server.Issuer.issue`, before the TokenReview, the
allowlist or the CSR parser sees anything. A failure is an `errors.InvalidRequest` whose text
(fixed, naming the field: "token: too long") is what the caller is told; the values are never
repeated, in the answer or in the log. The caller has no certificate yet: this listener
answers anyone who can reach it.

Each limit is a constant with its reason; docs/security.md lists them.
"""

from __future__ import annotations

import re

from coxswain_identity import csr, errors

__all__ = ["CSR_MAX", "QUOTE_MAX", "TOKEN_MAX", "quote", "request"]

# token: a projected ServiceAccount token is a JWS of about 1 KiB. 16 KiB leaves room for long
# issuers and many audiences while keeping what is forwarded to the API server small.
TOKEN_MAX = 16 * 1024
# RFC 7515 7.1: the JWS Compact Serialization is BASE64URL(header) "." BASE64URL(payload) "."
# BASE64URL(signature); RFC 7515 2: base64url "with all trailing '=' characters omitted",
# whose alphabet is RFC 4648 5's letters, digits, "-" and "_".
TOKEN = re.compile(r"[A-Za-z0-9_.-]+")
# csr_pem: the CSR parser's own bound (a P-384 or RSA-4096 request is well under 4 KiB).
CSR_MAX = csr.MAX_CSR_BYTES
# RFC 7468 3: textual encodings are lines of printable ASCII (base64 and the BEGIN/END lines);
# "parsers MUST handle ... whitespace" (tabs, spaces, CR and LF). Nothing else is PEM.
PEM = re.compile(rb"[\x20-\x7e\t\r\n]+")
# Log lines quote at most this much of any value the caller or the API server chose.
QUOTE_MAX = 128


def request(message: object) -> errors.IdentityError | None:
    """None when the request may go on; otherwise the error that ends its call."""
    token = getattr(message, "token", None)
    csr_pem = getattr(message, "csr_pem", None)
    if not isinstance(token, str):
        return errors.InvalidRequest("token: wrong type")
    if not token:
        # A call without a credential is unauthenticated (gRPC status codes, UNAUTHENTICATED).
        return errors.Unauthenticated("no token")
    if len(token) > TOKEN_MAX:
        return errors.InvalidRequest("token: too long")
    if TOKEN.fullmatch(token) is None:
        return errors.InvalidRequest("token: bad characters")
    if not isinstance(csr_pem, bytes):
        return errors.InvalidRequest("csr_pem: wrong type")
    if not csr_pem:
        return errors.InvalidCsr("csr_pem: missing")
    if len(csr_pem) > CSR_MAX:
        return errors.InvalidCsr("csr_pem: too long")
    if PEM.fullmatch(csr_pem) is None:
        return errors.InvalidCsr("csr_pem: bad characters")
    return None


def quote(value: object, limit: int = QUOTE_MAX) -> str:
    """`value` for a log line or an answer: repr-escaped, cut to `limit` characters of it."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} chars)"
