"""Checking a password against an htpasswd hash: {SHA}, apr1 ($apr1$) and bcrypt ($2y$ ...).

Where it sits: `basic.BasicCheck` calls `verify_fast` on the event loop for the schemes that
cost microseconds, and runs `verify_bcrypt` in `POOL`'s threads, since bcrypt is slow by
design (measured here: about 110 ms at cost 10; docs/performance.md).

Why libcrypt through ctypes: the system's libcrypt (libxcrypt, in every Debian image) has
bcrypt, and a ctypes call releases the GIL while it runs, so a verification in a thread leaves
the event loop serving (the stdlib `crypt` module holds the GIL throughout, and is gone in
3.13). apr1 is Apache's MD5-crypt with its own magic, written out here (libcrypt knows only
the `$1$` variant); {SHA} is base64 of SHA-1. Every comparison is constant-time.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import hashlib
import hmac
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["POOL", "apr1", "bcrypt_available", "verify_bcrypt", "verify_fast"]

_ITOA64 = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_CRYPT_DATA = 32768  # sizeof(struct crypt_data) in libxcrypt
POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bcrypt")
_local = threading.local()
# The schemes are MD5 and SHA-1 by definition (Apache's htpasswd -m and -s): what a migrated
# Secret holds. docs/routing.md recommends bcrypt.
_md5 = hashlib.md5
_sha1 = hashlib.sha1


def _libcrypt() -> Callable[[bytes, bytes, Any, int], bytes | None] | None:
    """libcrypt's `crypt_rn(phrase, setting, data, size)`; None where there is none."""
    name = ctypes.util.find_library("crypt")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).crypt_rn
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_char_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    return function


_crypt_rn = _libcrypt()


def bcrypt_available() -> bool:
    return _crypt_rn is not None


def verify_bcrypt(password: bytes, hashed: bytes) -> bool:
    """bcrypt through libcrypt; meant for a worker thread (the GIL is released meanwhile)."""
    if _crypt_rn is None or b"\0" in password:
        return False
    data = getattr(_local, "data", None)
    if data is None:
        data = _local.data = ctypes.create_string_buffer(_CRYPT_DATA)
    result = _crypt_rn(password, hashed, data, _CRYPT_DATA)
    return result is not None and hmac.compare_digest(result, hashed)


def _to64(value: int, count: int) -> bytes:
    out = bytearray()
    for _ in range(count):
        out.append(_ITOA64[value & 0x3F])
        value >>= 6
    return bytes(out)


def apr1(password: bytes, salt: bytes, magic: bytes = b"$apr1$") -> bytes:
    """Apache's MD5-crypt of `password` with `salt` (at most 8 characters are read)."""
    salt = salt[:8]
    mixed = _md5(password + salt + password).digest()
    ctx = bytearray(password + magic + salt)
    for left in range(len(password), 0, -16):
        ctx += mixed[: min(16, left)]
    i = len(password)
    while i:
        ctx += b"\0" if i & 1 else password[:1]
        i >>= 1
    final = _md5(ctx).digest()
    for i in range(1000):
        step = password if i & 1 else final
        if i % 3:
            step += salt
        if i % 7:
            step += password
        step += final if i & 1 else password
        final = _md5(step).digest()
    f = final
    encoded = b"".join(
        _to64((f[a] << 16) | (f[b] << 8) | f[c], 4)
        for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5))
    )
    return magic + salt + b"$" + encoded + _to64(f[11], 2)


def verify_fast(password: bytes, hashed: bytes) -> bool:
    """{SHA} and apr1 (False for any other scheme: bcrypt goes to `verify_bcrypt`)."""
    if hashed.startswith(b"{SHA}"):
        digest = base64.b64encode(_sha1(password).digest())
        return hmac.compare_digest(digest, hashed[5:])
    if hashed.startswith(b"$apr1$"):
        salt = hashed[6:].split(b"$", 1)[0]
        return hmac.compare_digest(apr1(password, salt), hashed)
    return False
