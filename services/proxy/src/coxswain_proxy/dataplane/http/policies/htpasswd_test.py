"""The hash schemes against known answers: apr1 as `openssl passwd -apr1` writes it, the same
code with libcrypt's `$1$` magic agreeing with libcrypt, {SHA} as htpasswd -s writes it, and
bcrypt through libcrypt; a wrong password and a scheme not served never verify."""

from __future__ import annotations

import ctypes

import pytest

from coxswain_proxy.dataplane.http.policies import htpasswd

# `openssl passwd -apr1 -salt saltsalt secret`
APR1 = b"$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"


def _libcrypt(password: bytes, setting: bytes) -> bytes:
    function = htpasswd._crypt_rn
    assert function is not None
    data = ctypes.create_string_buffer(32768)
    result = function(password, setting, data, 32768)
    assert result is not None
    return bytes(result)


def test_apr1_matches_openssl() -> None:
    assert htpasswd.apr1(b"secret", b"saltsalt") == APR1


@pytest.mark.parametrize("password", [b"", b"x", b"secret", b"a much longer password " * 3])
def test_md5_crypt_matches_libcrypt(password: bytes) -> None:
    assert htpasswd.apr1(password, b"abcd1234", b"$1$") == _libcrypt(password, b"$1$abcd1234")


@pytest.mark.parametrize(
    ("password", "hashed", "expected"),
    [
        pytest.param(b"secret", APR1, True, id="apr1"),
        pytest.param(b"Secret", APR1, False, id="apr1 wrong password"),
        pytest.param(b"secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=", True, id="sha"),
        pytest.param(b"secret", b"{SHA}AAAAG6MezRroT3XKqkdPOmY/BfQ=", False, id="sha wrong"),
        pytest.param(b"secret", b"sa3tHJ3/KuYvI", False, id="crypt(3) DES is not served"),
    ],
)
def test_verify_fast(password: bytes, hashed: bytes, expected: bool) -> None:
    assert htpasswd.verify_fast(password, hashed) is expected


def test_bcrypt_through_libcrypt() -> None:
    hashed = _libcrypt(b"hunter2", b"$2y$04$abcdefghijklmnopqrstuu")
    assert htpasswd.verify_bcrypt(b"hunter2", hashed)
    assert not htpasswd.verify_bcrypt(b"hunter3", hashed)
    assert not htpasswd.verify_bcrypt(b"hunter2\0", hashed)
