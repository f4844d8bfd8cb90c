"""A rule's policy compiled: what its requests need of it, built once per snapshot.

Where it sits: `tables.rule_plan` calls `compile_policy` for each rule, off the request path,
and keeps the `Compiled` in `RulePlan.policy`; `gate.admit` runs a request through it. This
module and what it imports (`access`, `request_limits`, `basic`, `affinity`) know nothing of
heads, tables or the request cycle, so `tables` imports it without a cycle: what those modules
need of a request cycle or of the tables they name by a `Protocol` of their own.
"""

from __future__ import annotations

import re

from coxswain_proxy.dataplane import framing
from coxswain_proxy.dataplane.http.policies import basic
from coxswain_proxy.dataplane.http.policies.access import CidrSet, SourceCheck
from coxswain_proxy.dataplane.http.policies.affinity import Affinity
from coxswain_proxy.dataplane.http.policies.request_limits import Buckets, InFlight, state
from coxswain_routing import (
    AuthStyle,
    ClientCertificate,
    CookieSplit,
    ExternalAuth,
    Policy,
    RateKey,
    Rule,
)

__all__ = ["ClientCheck", "Compiled", "ExternalCheck", "compile_policy"]

# GEP-1494, HTTPAuthConfig.allowedHeaders: "The following headers must always be sent to the
# authorization server, regardless of this setting: Host, Method, Path, Content-Length,
# Authorization" (the first three are the request line and the Host the head is made with,
# Content-Length is written by `extauthz.head`).
_ALWAYS_SENT = frozenset({b"authorization"})


class ExternalCheck:
    """An `ExternalAuth` compiled: the bytes that do not depend on the request."""

    __slots__ = ("auth", "endpoints", "host", "target", "method", "copied", "timeout",
                 "ext_authz", "sent")  # fmt: skip

    def __init__(self, auth: ExternalAuth) -> None:
        self.auth = auth
        self.endpoints = auth.endpoints
        self.host = auth.host.encode("latin-1")
        self.target = auth.path.encode("latin-1")  # ext_authz: the prefix of the client's
        self.method = auth.method.encode("latin-1")
        self.copied = frozenset(name.encode("latin-1") for name in auth.response_headers)
        self.timeout = auth.timeout_ms / 1000
        self.ext_authz = auth.style is AuthStyle.EXT_AUTHZ
        # ext_authz: the client's fields the auth request carries.
        self.sent = _ALWAYS_SENT | {name.encode("latin-1") for name in auth.request_headers}


class ClientCheck:
    """A `ClientCertificate` compiled (`client_cert.admit` runs it, from `dispatch`)."""

    __slots__ = ("store", "required", "max_chain", "subject", "passes", "error_page")

    def __init__(self, check: ClientCertificate) -> None:
        self.store = check.store  # the key of the ClientCaStore the connection must be under
        self.required = check.required
        self.max_chain = check.max_chain
        self.subject = re.compile(check.subject) if check.subject else None
        self.passes = check.pass_certificate
        # The 302's Location in place of a 400 (nginx's error_page 495 496); None: the 400.
        self.error_page = [("location", check.error_page)] if check.error_page else None


class _Rate:
    __slots__ = ("buckets", "per_client", "exempt")

    def __init__(self, rule: Rule, index: int, policy: Policy) -> None:
        limit = policy.rate_limits[index]
        self.buckets = state(("rate", rule.id, index, limit), Buckets, limit)
        self.per_client = limit.key is RateKey.CLIENT_ADDRESS
        self.exempt = CidrSet(limit.exempt) if limit.exempt else None


class Compiled:
    """What a request of one rule needs of its policy, built once per snapshot."""

    __slots__ = ("client", "sources", "max_body", "in_flight", "rates", "basic", "external",
                 "affinity", "split", "access_log")  # fmt: skip

    def __init__(self, rule: Rule, policy: Policy) -> None:
        client = policy.client_certificate
        self.client = ClientCheck(client) if client is not None else None
        ranges = policy.source_ranges
        self.sources = SourceCheck(ranges) if ranges is not None else None
        self.max_body = policy.max_body_bytes
        limit = policy.connections_per_client
        self.in_flight = state(("in-flight", rule.id, limit), InFlight, limit) if limit else None
        self.rates = tuple(_Rate(rule, i, policy) for i in range(len(policy.rate_limits)))
        self.basic = basic.BasicCheck(policy.basic_auth) if policy.basic_auth else None
        external = policy.external_auth
        self.external = ExternalCheck(external) if external is not None else None
        self.affinity = Affinity(policy.affinity) if policy.affinity is not None else None
        self.split: CookieSplit | None = policy.cookie_split
        self.access_log = policy.access_log

    @property
    def picks(self) -> bool:
        """It has a say in the backend or endpoint picked."""
        return self.affinity is not None or self.split is not None


def compile_policy(rule: Rule) -> Compiled | None:
    """The rule's policy compiled; `framing.UnsafeField` for a piece no head may carry."""
    policy = rule.policy
    if policy is None or policy.empty:
        return None
    _check_pieces(policy)
    return Compiled(rule, policy)


def _check_pieces(policy: Policy) -> None:
    """What a policy writes into heads, checked by the data plane's own rules (`framing`)."""
    if policy.basic_auth is not None:
        framing.value(f'Basic realm="{policy.basic_auth.realm}"', "realm")
    external = policy.external_auth
    if external is not None:
        framing.value(external.host, "auth host")
        framing.value(external.path, "auth target")
        framing.name(external.method)
        for name in (*external.response_headers, *external.request_headers):
            framing.name(name)
        framing.value(external.signin or "-", "sign-in URL")
    if policy.client_certificate is not None and policy.client_certificate.error_page:
        framing.value(policy.client_certificate.error_page, "error page")
    if policy.affinity is not None:
        framing.name(policy.affinity.cookie)
        framing.value(policy.affinity.path, "cookie path")
