"""The client certificate a handshake verified, as a rule's check reads it (ingress-nginx's
auth-tls-*): its subject and issuer DNs and its PEM in nginx's formats, and the length of its
verified chain.

Where it sits: `tls` compiles each `ClientCaStore` a handshake may verify clients under into a
`ClientTrust` (its key, its bundle parsed) and leaves it on the handshake's `SSLObject`; the
client connection (`http.http11`, and `http2.server` after it) wraps it in a `ClientPeer`, whose
`certificate()` reads the certificate the first time a request asks (`http.policies.client_cert`)
and keeps what it read for the connection's later requests: nothing is read on a connection no
rule asks about, and nothing again per request. Sans-IO: DER and PEM in, strings out.

nginx's formats: `$ssl_client_s_dn` and `$ssl_client_i_dn` are OpenSSL's
`X509_NAME_print_ex(..., XN_FLAG_RFC2253)`, which `rfc2253` follows byte for byte: the RDNs
last to first ("CN=client,O=Example"), OpenSSL's short names (`ssl._ASN1Object`, the table of
the very library the proxy links), RFC 2253 escapes with a backslash, control characters and
every byte past ASCII as `\\XX` of its UTF-8, and an attribute OpenSSL has no name for as its
OID with its value's DER in hex (`1.2.3.4=#0C03616263`). `$ssl_client_escaped_cert` is the PEM
with everything but ALPHA, DIGIT and "-._~" percent-encoded (nginx's NGX_ESCAPE_URI_COMPONENT).

The chain's length: Python 3.11's `ssl` gives neither the chain OpenSSL verified
(`get_verified_chain` is 3.13's) nor the intermediates the client sent, only the leaf. So the
chain is rebuilt from the leaf against the store's bundle, each link's signature checked
(`verify_directly_issued_by`), shortest first, up to a self-issued certificate of the bundle:
a verified chain ends at one (OpenSSL's default, no partial chains). The limit: a chain that
needs an intermediate only the client sent cannot be rebuilt, and reads as length 0, which a
rule bounding the length refuses (it cannot be shown to be within the bound).
"""

from __future__ import annotations

import functools
import ssl
from collections import deque
from dataclasses import dataclass
from urllib.parse import quote

from cryptography import x509
from cryptography.exceptions import InvalidSignature

__all__ = ["ClientPeer", "ClientTrust", "PeerCertificate", "chain_length", "rfc2253"]

VERIFY = b"ssl-client-verify"
SUBJECT_DN = b"ssl-client-subject-dn"
ISSUER_DN = b"ssl-client-issuer-dn"
CERT = b"ssl-client-cert"
FIELD_NAMES = frozenset({VERIFY, SUBJECT_DN, ISSUER_DN, CERT})
NONE_FIELDS = ((VERIFY, b"NONE"),)  # no certificate: nginx sends the empty DNs not at all


class ClientTrust:
    """One `ClientCaStore` as a handshake validates under it: its key and its CAs by subject."""

    __slots__ = ("key", "by_subject", "roots")

    def __init__(self, key: str, bundle_pem: bytes) -> None:
        self.key = key  # the ClientCaStore's key, which a rule's ClientCertificate names
        try:
            cas = x509.load_pem_x509_certificates(bundle_pem)
        except ValueError:
            cas = []  # OpenSSL loaded what this cannot: no chain is rebuilt (length 0)
        self.by_subject: dict[x509.Name, list[x509.Certificate]] = {}
        for ca in cas:
            self.by_subject.setdefault(ca.subject, []).append(ca)
        self.roots = frozenset(ca for ca in cas if ca.subject == ca.issuer)


@dataclass(frozen=True, slots=True)
class PeerCertificate:
    """What a request learns of the connection's certificate, read once per connection."""

    subject: str  # $ssl_client_s_dn
    issuer: str  # $ssl_client_i_dn
    chain: int  # the verified chain's length, leaf and CA included; 0: not rebuilt
    fields: tuple[tuple[bytes, bytes], ...]  # ssl-client-verify and the DNs, as sent on
    escaped: bytes  # $ssl_client_escaped_cert, for ssl-client-cert


class ClientPeer:
    """A connection whose handshake validated its client under `trust`: the certificate it
    presented, read when first asked for."""

    __slots__ = ("trust", "sslobj", "read", "peer")

    def __init__(self, trust: ClientTrust, sslobj: ssl.SSLObject) -> None:
        self.trust = trust
        self.sslobj = sslobj
        self.read = False
        self.peer: PeerCertificate | None = None

    @property
    def key(self) -> str:
        return self.trust.key

    def certificate(self) -> PeerCertificate | None:
        """The verified certificate the client presented; None: it presented none."""
        if not self.read:
            self.read = True
            der = self.sslobj.getpeercert(binary_form=True)
            self.peer = read(der, self.trust) if der else None
        return self.peer


def read(der: bytes, trust: ClientTrust) -> PeerCertificate:
    leaf = x509.load_der_x509_certificate(der)
    issuer, subject = _names(leaf.tbs_certificate_bytes)
    subject_dn, issuer_dn = rfc2253(subject), rfc2253(issuer)
    fields = [(VERIFY, b"SUCCESS")]
    # nginx sends a field whose value is empty not at all (proxy_set_header).
    fields += [(n, v.encode("ascii")) for n, v in ((SUBJECT_DN, subject_dn),
               (ISSUER_DN, issuer_dn)) if v]  # fmt: skip
    pem = ssl.DER_cert_to_PEM_cert(der)
    return PeerCertificate(
        subject_dn, issuer_dn, chain_length(leaf, trust), tuple(fields),
        quote(pem, safe="").encode("ascii"),
    )  # fmt: skip


# ---------------------------------------------------------------------- the chain


def chain_length(leaf: x509.Certificate, trust: ClientTrust) -> int:
    """The shortest chain from `leaf` to a self-issued CA of the bundle, each link's signature
    checked, leaf and CA counted; 0 when the bundle alone makes none."""
    if leaf in trust.roots:
        return 1
    queue = deque([(leaf, 1)])
    seen = {leaf}
    while queue:
        cert, length = queue.popleft()
        for ca in trust.by_subject.get(cert.issuer, ()):
            if ca in seen or not _issued(cert, ca):
                continue
            if ca in trust.roots:
                return length + 1
            seen.add(ca)
            queue.append((ca, length + 1))
    return 0


def _issued(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


# ---------------------------------------------------------------------- DER, as far as names

# One AttributeTypeAndValue as the certificate encodes it: (OID in DER, value's whole TLV).
Attribute = tuple[bytes, bytes]
Rdn = list[Attribute]


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, where the content starts, where it ends) of the DER element at `at`."""
    tag, first = data[at], data[at + 1]
    start = at + 2
    if first < 0x80:
        return tag, start, start + first
    count = first & 0x7F
    length = int.from_bytes(data[start : start + count], "big")
    return tag, start + count, start + count + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in data[start:end]."""
    found = []
    at = start
    while at < end:
        tag, content, stop = _tlv(data, at)
        found.append((tag, at, content, stop))
        at = stop
    return found


def _names(tbs: bytes) -> tuple[list[Rdn], list[Rdn]]:
    """The issuer and subject of a TBSCertificate, as encoded (RFC 5280 §4.1: [0] version,
    serialNumber, signature, issuer, validity, subject, ...)."""
    _, content, end = _tlv(tbs, 0)
    parts = _children(tbs, content, end)
    if parts[0][0] == 0xA0:
        parts = parts[1:]
    return _name(tbs, parts[2]), _name(tbs, parts[4])


def _name(data: bytes, element: tuple[int, int, int, int]) -> list[Rdn]:
    _, _, content, end = element
    rdns = []
    for _, _, set_start, set_end in _children(data, content, end):
        rdn = []
        for _, _, seq_start, seq_end in _children(data, set_start, set_end):
            (_, oid_at, _, oid_end), (_, value_at, _, value_end) = _children(
                data, seq_start, seq_end
            )[:2]
            rdn.append((data[oid_at:oid_end], data[value_at:value_end]))
        rdns.append(rdn)
    return rdns


def _dotted(oid_tlv: bytes) -> str:
    _, start, end = _tlv(oid_tlv, 0)
    body = oid_tlv[start:end]
    arcs, value = [], 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in (first, arcs[0] - 40 * first, *arcs[1:]))


# ---------------------------------------------------------------------- RFC 2253, as OpenSSL


@functools.lru_cache(maxsize=256)
def _short_name(oid_tlv: bytes) -> str | None:
    """OpenSSL's short name for the OID (XN_FLAG_FN_SN); None: OpenSSL knows it not."""
    try:
        return ssl._ASN1Object(_dotted(oid_tlv)).shortname
    except ValueError:
        return None


# Bytes per character of the string types OpenSSL prints as text (a_strex.c, tag2nbyte): 0 is
# UTF8String (its bytes printed one by one), 1 a byte per character, else the width.
_WIDTH = {12: 0, 18: 1, 19: 1, 20: 1, 22: 1, 23: 1, 24: 1, 26: 1, 28: 4, 30: 2}
# charmap.h, the flags that count under XN_FLAG_RFC2253: escaped with a backslash anywhere;
# with a backslash first (and alone, OpenSSL's order of checks); last; as \XX.
_BACKSLASH = frozenset(b'"+,;<>\\')
_FIRST = frozenset(b"# ")
_LAST = frozenset(b" ")
_HEX = frozenset(range(0x20)) | {0x7F}


def rfc2253(name: list[Rdn]) -> str:
    """`X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253)`: nginx's $ssl_client_s_dn."""
    # XN_FLAG_DN_REV reverses the flat list of entries, so the RDNs and each RDN's members.
    rdns = [
        "+".join(_attribute(oid, value) for oid, value in reversed(rdn)) for rdn in reversed(name)
    ]
    return ",".join(rdns)


def _attribute(oid: bytes, value: bytes) -> str:
    short = _short_name(oid)
    if short is None:
        return f"{_dotted(oid)}={_dump(value)}"  # XN_FLAG_DUMP_UNKNOWN_FIELDS
    text = _text(value)
    return f"{short}={_dump(value) if text is None else text}"


def _dump(value: bytes) -> str:
    return "#" + value.hex().upper()  # ASN1_STRFLGS_DUMP_DER


def _text(value: bytes) -> str | None:
    """The value escaped as OpenSSL does; None: not a string type, or one OpenSSL could not
    convert, dumped instead."""
    tag, start, end = _tlv(value, 0)
    width = _WIDTH.get(tag)
    if width is None:
        return None  # ASN1_STRFLGS_DUMP_UNKNOWN
    content = value[start:end]
    if width == 0:
        encoded = content
    else:
        try:
            encoded = _utf8(content, width)
        except ValueError:
            return None
    return _escaped(encoded)


def _utf8(content: bytes, width: int) -> bytes:
    if len(content) % width:
        raise ValueError("not whole characters")
    if width == 1:
        return content.decode("latin-1").encode()
    chars = (int.from_bytes(content[i : i + width], "big") for i in range(0, len(content), width))
    return "".join(chr(c) for c in chars).encode()  # a surrogate raises, as UTF8_putc refuses


def _escaped(encoded: bytes) -> str:
    out = []
    last = len(encoded) - 1
    for i, byte in enumerate(encoded):
        # a_strex.c do_buf: the last character's flag replaces the first's (a lone "#" is
        # not escaped, a lone " " is).
        if (
            byte in _BACKSLASH
            or (i == last and byte in _LAST)
            or (i == 0 and i != last and byte in _FIRST)
        ):
            out.append("\\" + chr(byte))
        elif byte > 0x7F or byte in _HEX:
            out.append(f"\\{byte:02X}")
        else:
            out.append(chr(byte))
    return "".join(out)
