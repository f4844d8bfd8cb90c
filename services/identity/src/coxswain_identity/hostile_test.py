"""A forged IssueSvid caller's bytes over real TLS: each refused alone with fixed text.

The caller needs no certificate, so anyone who reaches the port can send these: each field of
IssueSvidRequest (token, csr_pem) with each wrong wire type, values over each limit or outside
each character set, and garbage. Each call must end INVALID_ARGUMENT with fixed text naming the
field (never the value, never an exception's text), be counted as `invalid_argument`, and leave
the replica serving: a well-formed request is issued an SVID next. Also: a bug beneath the
servicer ends that call alone, INTERNAL with fixed text, counted as `internal`.
Leaves out the well-formed refusals (issuance_test.py) and the CSR rules (csr_test.py).
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
import pytest
from cryptography import x509
from prometheus_client import REGISTRY

from coxswain_devkit.protowire import I32, I64, LEN, VARINT, WRONG, f_len, tag, varint
from coxswain_identity import csr, service, validate
from coxswain_identity.conftest import SHARED_PROXY, issue, make_csr, token
from coxswain_proto import rpc

TOKEN, CSR = f_len(1, b"a.b.c"), f_len(2, b"-----BEGIN CERTIFICATE REQUEST-----\n")

CASES = [
    *(
        pytest.param(WRONG[wire](1) + CSR, "token: invalid", id=f"token-as-{name}")
        for wire, name in ((VARINT, "varint"), (I64, "fixed64"), (I32, "fixed32"))
    ),
    *(
        pytest.param(TOKEN + WRONG[wire](2), "csr_pem: invalid", id=f"csr-as-{name}")
        for wire, name in ((VARINT, "varint"), (I64, "fixed64"), (I32, "fixed32"))
    ),
    pytest.param(f_len(1, b"\xff\xfe") + CSR, "token: invalid", id="token-not-utf8"),
    pytest.param(
        f_len(1, b"a" * (validate.TOKEN_MAX + 1)) + CSR, "token: too long", id="token-over-max"
    ),
    pytest.param(f_len(1, b"a.b c") + CSR, "token: bad characters", id="token-space"),
    pytest.param(f_len(1, b"a.b\nc") + CSR, "token: bad characters", id="token-newline"),
    pytest.param(f_len(1, "токен".encode()) + CSR, "token: bad characters", id="token-non-ascii"),
    pytest.param(TOKEN, "csr_pem: missing", id="csr-missing"),
    pytest.param(
        TOKEN + f_len(2, b"A" * (csr.MAX_CSR_BYTES + 1)), "csr_pem: too long", id="csr-over-max"
    ),
    pytest.param(TOKEN + f_len(2, b"-----BEGIN\x00"), "csr_pem: bad characters", id="csr-nul"),
    pytest.param(TOKEN + f_len(2, b"\xff\xfe"), "csr_pem: bad characters", id="csr-binary"),
    pytest.param(b"\xff\xff\xff\xff not a protobuf", "IssueSvidRequest: invalid", id="garbage"),
    pytest.param(tag(1, LEN) + varint(40) + b"abc", "token: invalid", id="truncated"),
    pytest.param(tag(1, 3) + tag(1, 4), "token: invalid", id="group-wire-type"),
    pytest.param(TOKEN + tag(9, 7), "IssueSvidRequest: invalid", id="wire-type-7"),
    pytest.param(b"\x80" * 11, "IssueSvidRequest: invalid", id="tag-11-byte-varint"),
]


def _count(result: str) -> float:
    value = REGISTRY.get_sample_value("coxswain_identity_svid_issuance_total", {"result": result})
    return value or 0.0


async def _raw_error(replica: service.Service, data: bytes) -> grpc.aio.AioRpcError:
    authority = replica.authority()
    assert authority is not None
    credentials = grpc.ssl_channel_credentials(authority.bundle_pem)
    async with grpc.aio.secure_channel(f"127.0.0.1:{replica.port}", credentials) as channel:
        call = channel.unary_unary(rpc.IDENTITY_ISSUE_SVID, request_serializer=None)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(data, timeout=20)
        return caught.value


@pytest.mark.parametrize(("data", "detail"), CASES)
async def test_each_forgery_is_invalid_argument_naming_the_field(
    replica: service.Service, core: Any, data: bytes, detail: str
) -> None:
    before = _count("invalid_argument")
    err = await _raw_error(replica, data)
    assert (err.code(), err.details()) == (grpc.StatusCode.INVALID_ARGUMENT, detail)
    assert _count("invalid_argument") == before + 1

    response = await issue(replica, token(core, SHARED_PROXY), make_csr())
    assert x509.load_pem_x509_certificates(response.certificate_chain_pem)


async def test_a_request_over_the_listener_bound_is_refused_before_it_is_read(
    replica: service.Service,
) -> None:
    err = await _raw_error(replica, f_len(1, b"a" * service.MAX_REQUEST_BYTES))
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_bug_beneath_the_servicer_is_internal_with_fixed_text(
    replica: service.Service, core: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(csr, "sign", broken)
    before = _count("internal")
    err = await _raw_error(
        replica, f_len(1, token(core, SHARED_PROXY).encode()) + f_len(2, make_csr())
    )
    assert (err.code(), err.details()) == (grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL)
    assert _count("internal") == before + 1

    monkeypatch.undo()
    response = await issue(replica, token(core, SHARED_PROXY), make_csr())
    assert x509.load_pem_x509_certificates(response.certificate_chain_pem)
