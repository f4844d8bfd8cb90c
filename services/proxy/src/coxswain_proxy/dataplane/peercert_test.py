"""What a request learns of a verified client certificate (`peercert`), sans IO: certificates
built here, read as the connection reads the peer's DER.

Covers: the subject and issuer DNs as nginx's $ssl_client_s_dn and $ssl_client_i_dn (OpenSSL's
XN_FLAG_RFC2253; each expected string is what `openssl x509 -nameopt RFC2253` prints for the
same name): RDNs last to first, a multi-valued RDN, OpenSSL's short names, backslash escapes,
the first and last character's, control characters and UTF-8 as \\XX, a BMPString, an attribute
OpenSSL has no name for dumped as DER; the escaped PEM as nginx's $ssl_client_escaped_cert; the
chain rebuilt against the bundle (through an intermediate, a CA rotated under the same name, a
self-signed client, an intermediate the bundle lacks). Leaves out the handshake and the rule
(`http/policies/client_cert_test`).
"""

from __future__ import annotations

import datetime
import string

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier

from coxswain_proxy.dataplane import peercert

NOW = datetime.datetime.now(datetime.UTC)
Key = ec.EllipticCurvePrivateKey


def certificate(
    subject: x509.Name, issuer: tuple[x509.Name, Key] | None = None, *, ca: bool = False
) -> tuple[x509.Certificate, Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - datetime.timedelta(minutes=5))
        .not_valid_after(NOW + datetime.timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(True, None), critical=True)
    return builder.sign(issuer_key, hashes.SHA256()), key


def cn(value: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, value)])


def pem(*certificates: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)


ROOT, ROOT_KEY = certificate(cn("root"), ca=True)
MIDDLE, MIDDLE_KEY = certificate(cn("middle"), (ROOT.subject, ROOT_KEY), ca=True)


def read(leaf: x509.Certificate, *bundle: x509.Certificate) -> peercert.PeerCertificate:
    trust = peercert.ClientTrust("client-ca/443/shop.example.com", pem(*(bundle or (ROOT,))))
    return peercert.read(leaf.public_bytes(serialization.Encoding.DER), trust)


Attribute = x509.NameAttribute[str]


def attr(oid: ObjectIdentifier, value: str, kind: _ASN1Type | None = None) -> Attribute:
    if kind is None:
        return x509.NameAttribute(oid, value)
    return x509.NameAttribute(oid, value, _type=kind)


def rdns(*groups: list[Attribute]) -> x509.Name:
    return x509.Name([x509.RelativeDistinguishedName(group) for group in groups])


def one(value: str, oid: ObjectIdentifier = NameOID.COMMON_NAME) -> x509.Name:
    return rdns([attr(oid, value)])


ORG, UNIT, ALICE = (
    attr(NameOID.ORGANIZATION_NAME, "Example"),
    attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "ops"),
    attr(NameOID.COMMON_NAME, "alice"),
)
SHORT_NAMES = rdns(
    [attr(NameOID.EMAIL_ADDRESS, "a@b.c")],
    [attr(NameOID.DOMAIN_COMPONENT, "example")],
    [attr(NameOID.USER_ID, "u1")],
    [attr(NameOID.SERIAL_NUMBER, "42")],
)
BMP = rdns([attr(NameOID.COMMON_NAME, "bmpé", _ASN1Type.BMPString)])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(rdns([attr(NameOID.COUNTRY_NAME, "DE")], [ORG], [ALICE]),
                     "CN=alice,O=Example,C=DE", id="rdns-last-to-first"),
        pytest.param(rdns([ORG, UNIT], [ALICE]), "CN=alice,O=Example+OU=ops",
                     id="multi-valued-rdn-reversed-as-encoded"),
        pytest.param(one('Ex, "ample" + <Co>; \\ = x', NameOID.ORGANIZATION_NAME),
                     'O=Ex\\, \\"ample\\" \\+ \\<Co\\>\\; \\\\ = x', id="rfc2253-specials"),
        pytest.param(one("#a b "), "CN=\\#a b\\ ", id="leading-hash-trailing-space"),
        pytest.param(one("#"), "CN=#", id="a-lone-hash-is-last-not-first"),
        pytest.param(one(" "), "CN=\\ ", id="a-lone-space"),
        pytest.param(one("\x00a\x01\x7f"), "CN=\\00a\\01\\7F", id="controls-hex"),
        pytest.param(one("Jörg 😀"), "CN=J\\C3\\B6rg \\F0\\9F\\98\\80", id="utf-8-bytes-hex"),
        pytest.param(BMP, "CN=bmp\\C3\\A9", id="bmp-string-as-utf-8"),
        pytest.param(SHORT_NAMES, "serialNumber=42,UID=u1,DC=example,emailAddress=a@b.c",
                     id="openssl-short-names"),
        pytest.param(one("custom", ObjectIdentifier("1.2.3.4.5")), "1.2.3.4.5=#0C06637573746F6D",
                     id="unknown-attribute-dumped"),
        pytest.param(x509.Name([]), "", id="empty"),
    ],
)  # fmt: skip
def test_the_subject_dn_is_openssls_rfc2253(name: x509.Name, expected: str) -> None:
    leaf, _ = certificate(name, (ROOT.subject, ROOT_KEY))
    read_back = read(leaf)
    assert (read_back.subject, read_back.issuer) == (expected, "CN=root")
    subject_field = [(n, v) for n, v in read_back.fields if n == peercert.SUBJECT_DN]
    assert subject_field == ([(peercert.SUBJECT_DN, expected.encode())] if expected else [])


def test_the_pem_is_escaped_as_nginx_escapes_a_uri_component() -> None:
    leaf, _ = certificate(cn("alice"), (ROOT.subject, ROOT_KEY))
    text = pem(leaf).decode()
    # ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT) leaves ALPHA, DIGIT and "-._~" alone.
    unreserved = string.ascii_letters + string.digits + "-._~"
    expected = "".join(c if c in unreserved else f"%{ord(c):02X}" for c in text)
    assert read(leaf).escaped == expected.encode()
    assert expected.startswith("-----BEGIN%20CERTIFICATE-----%0A")


def test_the_chain_is_rebuilt_against_the_bundle() -> None:
    direct, _ = certificate(cn("direct"), (ROOT.subject, ROOT_KEY))
    deep, _ = certificate(cn("deep"), (MIDDLE.subject, MIDDLE_KEY))
    assert read(direct, ROOT).chain == 2
    assert read(deep, ROOT, MIDDLE).chain == 3
    assert read(deep, MIDDLE, ROOT).chain == 3  # the bundle's order does not matter
    # Only the client sent the intermediate: Python's ssl does not show it, no chain is made.
    assert read(deep, ROOT).chain == 0


def test_a_ca_rotated_under_the_same_name_is_told_apart_by_its_signature() -> None:
    old, _ = certificate(cn("client CA"), ca=True)
    new, new_key = certificate(cn("client CA"), ca=True)
    leaf, _ = certificate(cn("alice"), (new.subject, new_key))
    assert read(leaf, old, new).chain == 2
    assert read(leaf, old).chain == 0


def test_a_self_signed_client_in_the_bundle_is_a_chain_of_one() -> None:
    alone, _ = certificate(cn("alone"))
    assert read(alone, alone).chain == 1
