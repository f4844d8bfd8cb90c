"""The discovery stream's boundary: every field a proxy sends, checked before anything uses it.

Where it sits: `coxswain_proto.rpc` has already checked each message's wire format (every field
of its declared type, UTF-8 strings, nothing truncated), so what arrives here is typed; these
functions check what the types cannot say: presence, length, character set and range. The
server runs `proxy_message` on each message as it is read, before it touches the stream's
session, the node registry or anything shared; a failure ends that stream INVALID_ARGUMENT
with the error's `detail`, fixed text naming the field ("subscribe.node_id: too long"), never
the value. The types are re-checked too: betterproto2 messages can be built by hand.

Each limit is a constant with its reason; docs/security.md lists them.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from coxswain_proto import discovery as pb

__all__ = [
    "BOUND_MAX",
    "NACK_DETAIL_MAX",
    "NAME_MAX",
    "NAMESPACE_MAX",
    "NODE_ID_MAX",
    "NONCE_MAX",
    "QUOTE_MAX",
    "VERSION_MAX",
    "Invalid",
    "Problem",
    "ack",
    "nack",
    "node_status",
    "proxy_message",
    "quote",
    "scope",
    "subscribe",
]

# node_id: a proxy's hostname by default (its pod name), so a DNS name's length, 253
# (RFC 1035 2.3.4), and hostname characters plus ":" and "_" for operators' own schemes. It is
# a dict key here, a log field, and is quoted in Gateway status ("waiting for <node> to bind").
NODE_ID_MAX = 253
NODE_ID = re.compile(r"[A-Za-z0-9._:-]+")
# Gateway scope: a Gateway's namespace is a Kubernetes namespace, an RFC 1123 label (63 at
# most); its name an object name, an RFC 1123 subdomain (253 at most). RFC 1123 2.1 relaxes
# RFC 952 to let a label start with a digit; Kubernetes also requires lower case.
NAMESPACE_MAX = 63
NAME_MAX = 253
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
LABEL = re.compile(_LABEL)
SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
# Ack/Nack version: the controller's snapshot versions are 64 hex digits (SHA-256); twice that
# leaves room for another format without letting a proxy echo anything it likes.
VERSION_MAX = 128
# Ack/Nack nonce: the controller's nonces are 16 hex digits (secrets.token_hex(8)).
NONCE_MAX = 64
TOKEN = re.compile(r"[A-Za-z0-9._:-]+")
# Nack detail: a proxy's reason for refusing a snapshot, only ever logged (cut to QUOTE_MAX).
# An exception's text naming a resource key or two fits many times over.
NACK_DETAIL_MAX = 16 * 1024
# NodeStatus: every port bound once over TCP and once over UDP is the most a proxy can hold.
BOUND_MAX = 2 * 65535
PORT_MIN, PORT_MAX = 1, 65535
# Log lines quote at most this much of any value a client chose.
QUOTE_MAX = 128

_PROTOCOLS = frozenset(p for p in pb.ListenerProtocol if p is not pb.ListenerProtocol.UNSPECIFIED)


class Problem(enum.StrEnum):
    MISSING = "missing"
    WRONG_TYPE = "wrong type"
    TOO_LONG = "too long"
    BAD_CHARACTERS = "bad characters"
    OUT_OF_RANGE = "out of range"
    NO_KIND = "no kind"
    MORE_THAN_ONE_KIND = "more than one kind"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class Invalid:
    """A field a proxy sent that fails a check: which field, and what is wrong with it."""

    field: str  # its path, e.g. "subscribe.scope.gateway.name"
    problem: Problem

    @property
    def detail(self) -> str:
        """What the proxy is told (INVALID_ARGUMENT): fixed text, never the value."""
        return f"{self.field}: {self.problem}"


def quote(value: object, limit: int = QUOTE_MAX) -> str:
    """`value` for a log line: repr-escaped, and cut to `limit` characters of it."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} chars)"


def proxy_message(message: object) -> Invalid | None:
    """The envelope holds exactly one kind, and that kind passes its own checks."""
    if not isinstance(message, pb.ProxyMessage):
        return Invalid("proxy_message", Problem.WRONG_TYPE)
    kinds = [
        (check, value)
        for check, value in (
            (subscribe, message.subscribe),
            (ack, message.ack),
            (nack, message.nack),
            (node_status, message.node_status),
        )
        if value is not None
    ]
    if not kinds:
        return Invalid("proxy_message", Problem.NO_KIND)
    if len(kinds) > 1:
        return Invalid("proxy_message", Problem.MORE_THAN_ONE_KIND)
    check, value = kinds[0]
    return check(value)


def subscribe(message: object) -> Invalid | None:
    if not isinstance(message, pb.Subscribe):
        return Invalid("subscribe", Problem.WRONG_TYPE)
    found = _text("subscribe.node_id", message.node_id, NODE_ID_MAX, NODE_ID)
    if found is None and not _uint32(message.wire_version):
        found = Invalid("subscribe.wire_version", Problem.OUT_OF_RANGE)
    # Spec 002: "A Subscribe message with no scope field is treated as SharedPool."
    if found is None and message.scope is not None:
        found = scope(message.scope, "subscribe.scope")
    return found


def scope(message: object, field: str = "scope") -> Invalid | None:
    """Exactly one kind; a Gateway names a namespace (a label) and a name (a subdomain)."""
    if not isinstance(message, pb.Scope):
        return Invalid(field, Problem.WRONG_TYPE)
    shared, gateway = message.shared_pool, message.gateway
    # Spec 002: "A scope message with no kind discriminator is rejected as malformed to
    # prevent a zero-value proto from silently escalating to SharedPool."
    if shared is None and gateway is None:
        return Invalid(field, Problem.NO_KIND)
    if shared is not None and gateway is not None:
        return Invalid(field, Problem.MORE_THAN_ONE_KIND)
    if shared is not None:
        ok = isinstance(shared, pb.ScopeSharedPool)
        return None if ok else Invalid(f"{field}.shared_pool", Problem.WRONG_TYPE)
    if not isinstance(gateway, pb.ScopeGateway):
        return Invalid(f"{field}.gateway", Problem.WRONG_TYPE)
    return _text(f"{field}.gateway.namespace", gateway.namespace, NAMESPACE_MAX, LABEL) or _text(
        f"{field}.gateway.name", gateway.name, NAME_MAX, SUBDOMAIN
    )


def ack(message: object) -> Invalid | None:
    if not isinstance(message, pb.Ack):
        return Invalid("ack", Problem.WRONG_TYPE)
    return _text("ack.version", message.version, VERSION_MAX, TOKEN) or _text(
        "ack.nonce", message.nonce, NONCE_MAX, TOKEN
    )


def nack(message: object) -> Invalid | None:
    """The nonce is required (it names what is refused); the version and detail may be empty."""
    if not isinstance(message, pb.Nack):
        return Invalid("nack", Problem.WRONG_TYPE)
    found = _text("nack.nonce", message.nonce, NONCE_MAX, TOKEN)
    if found is None and message.version != "":
        found = _text("nack.version", message.version, VERSION_MAX, TOKEN)
    if found is None and not isinstance(message.detail, str):
        found = Invalid("nack.detail", Problem.WRONG_TYPE)
    if found is None and len(message.detail) > NACK_DETAIL_MAX:
        found = Invalid("nack.detail", Problem.TOO_LONG)
    return found


def node_status(message: object) -> Invalid | None:
    """Each bound port in range with a known protocol, no pair twice, BOUND_MAX at most."""
    if not isinstance(message, pb.NodeStatus):
        return Invalid("node_status", Problem.WRONG_TYPE)
    if not isinstance(message.bound, list):
        return Invalid("node_status.bound", Problem.WRONG_TYPE)
    if len(message.bound) > BOUND_MAX:
        return Invalid("node_status.bound", Problem.TOO_LONG)
    seen: set[tuple[int, pb.ListenerProtocol]] = set()
    for bound in message.bound:
        found = _bound_port(bound)
        if found is not None:
            return found
        pair = (bound.port, bound.protocol)
        if pair in seen:
            return Invalid("node_status.bound", Problem.DUPLICATE)
        seen.add(pair)
    return None


def _bound_port(bound: object) -> Invalid | None:
    if not isinstance(bound, pb.BoundPort):
        return Invalid("node_status.bound", Problem.WRONG_TYPE)
    if not isinstance(bound.port, int) or not PORT_MIN <= bound.port <= PORT_MAX:
        return Invalid("node_status.bound.port", Problem.OUT_OF_RANGE)
    if not isinstance(bound.protocol, pb.ListenerProtocol) or bound.protocol not in _PROTOCOLS:
        return Invalid("node_status.bound.protocol", Problem.OUT_OF_RANGE)
    return None


def _text(field: str, value: object, limit: int, chars: re.Pattern[str]) -> Invalid | None:
    """A required string of at most `limit` characters, every one matching `chars`."""
    if not isinstance(value, str):
        return Invalid(field, Problem.WRONG_TYPE)
    if not value:
        return Invalid(field, Problem.MISSING)
    if len(value) > limit:
        return Invalid(field, Problem.TOO_LONG)
    if chars.fullmatch(value) is None:
        return Invalid(field, Problem.BAD_CHARACTERS)
    return None


def _uint32(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 32
