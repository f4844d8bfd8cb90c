"""Basic auth: the Authorization header against a rule's htpasswd entries.

Where it sits: `gate.admit` asks `BasicCheck.check` after the limits, with the request's
Authorization field. A credential verified
once is remembered (by a digest of the header's value, never the password, in a bounded
memo), so the hash is computed once per credential and not per request. {SHA} and apr1 are
verified on the event loop (microseconds and about a millisecond); bcrypt, which is slow by
design, in `htpasswd.POOL`'s threads, with the request waiting meanwhile and at most
`MAX_PENDING` such verifications queued per worker (past it: 503).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib

from coxswain_proxy.dataplane.http.policies import htpasswd
from coxswain_routing import BasicAuth

__all__ = ["BasicCheck", "DENIED", "BUSY", "PASSED"]

MEMO_ENTRIES = 1024  # credentials remembered per rule
MAX_PENDING = 64  # bcrypt verifications queued per worker
PASSED, DENIED, BUSY = 0, 1, 2


class _Verifying:
    """The bcrypt verifications queued or running in this worker."""

    count = 0


class BasicCheck:
    __slots__ = ("users", "challenge", "verified")

    def __init__(self, auth: BasicAuth) -> None:
        self.users = {user.encode(): hashed.encode() for user, hashed in auth.users}
        # RFC 7617 §2: challenge = "Basic" realm; the realm is checked to need no escaping.
        self.challenge = [("www-authenticate", f'Basic realm="{auth.realm}"')]
        self.verified: dict[bytes, bool] = {}

    def check(self, value: bytes) -> int | asyncio.Future[bool]:
        """The request's Authorization field (b"": none) judged: PASSED, DENIED, BUSY, or a
        future the bcrypt verification resolves."""
        if not value:
            return DENIED
        key = hashlib.sha256(value).digest()
        if key in self.verified:
            return PASSED
        credentials = _credentials(value)
        if credentials is None:
            return DENIED
        user, password = credentials
        hashed = self.users.get(user)
        if hashed is None:
            return DENIED
        if not hashed.startswith(b"$2"):
            if not htpasswd.verify_fast(password, hashed):
                return DENIED
            self._remember(key)
            return PASSED
        return self._bcrypt(key, password, hashed)

    def _bcrypt(self, key: bytes, password: bytes, hashed: bytes) -> int | asyncio.Future[bool]:
        if _Verifying.count >= MAX_PENDING:
            return BUSY
        _Verifying.count += 1
        loop = asyncio.get_running_loop()
        verified = loop.run_in_executor(htpasswd.POOL, htpasswd.verify_bcrypt, password, hashed)

        def settled(future: asyncio.Future[bool]) -> None:
            _Verifying.count -= 1
            if not future.cancelled() and future.exception() is None and future.result():
                self._remember(key)

        verified.add_done_callback(settled)
        return verified

    def _remember(self, key: bytes) -> None:
        if len(self.verified) >= MEMO_ENTRIES:
            self.verified.clear()
        self.verified[key] = True


def _credentials(value: bytes) -> tuple[bytes, bytes] | None:
    """RFC 7617 §2: credentials = "Basic" SP base64(user-id ":" password); the scheme is
    case-insensitive (RFC 9110 §11.1)."""
    scheme, _, token = value.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None
