"""auth-tls-*: an Ingress host's client certificates, asked for on the Ingress HTTPS port and
checked on each of its requests.

Where it sits: `ingresses` reads each Ingress's `ClientTlsSpec` (`annotations.tls`) and its
Secret's ca.crt (`tls_secrets`) in its stages, and refuses there an Ingress this cannot serve
(`refusal`). Once every Ingress is lowered, `claim` settles which one configures each host;
then every Ingress's rules on that host go into the tables through `ClientHosts.https` and
`ClientHosts.http`, and the host's `ClientCaStore` beside them.

What ingress-nginx does, and so this:
- The check is a server's (a host's), not a location's: `ssl_client_certificate`,
  `ssl_verify_client`, `ssl_verify_depth`, the error page, match-cn and the ssl-client-*
  headers are written in the host's server block, from the first Ingress (oldest first) that
  sets auth-tls-secret on it ("Server %q is already configured for mutual authentication"),
  and hold for every path of the host, whichever Ingress brings it. So: one store and one
  `ClientCertificate` per host, from its oldest served Ingress with auth-tls-secret, on every
  rule of the host on the HTTPS port; an Ingress on that host that says otherwise (or nothing)
  is told so with a Conflicted Event.
- nginx asks for the certificate in the handshake and judges the request after it
  (`ngx_http_process_request`): no certificate under verify "on" is answered 400 (its 496),
  not refused in the handshake. So the store's mode is AllowValidOrNone for "on" and
  "optional" alike, and `ClientCertificate.required` answers each request. A certificate that
  fails verification fails the handshake here, where nginx answers 400 (495).
- verify-client "off" asks for nothing: no store and no check; the requests sent on carry
  ssl-client-verify NONE and none of the other ssl-client-* headers, as nginx sets them.
- Plain HTTP is never checked (nginx's ssl variables are empty without TLS, so it sends the
  headers empty, which is not at all): the HTTP port serves the host's paths as `lowering`
  says, where ssl-redirect (on by default for a host with a certificate) sends them to HTTPS,
  and the ssl-client-* headers a client sent are taken out. An Ingress whose paths of such a
  host are served so is told with a Warning Event (ACME challenges aside).
- A rule without a host is nginx's catch-all server, which answers every name no other server
  does. A store for the whole port would ask the clients of every host for a certificate, so
  such an Ingress is refused. A defaultBackend is not a rule: nginx serves it on the catch-all
  server its auth-tls-* do not configure, and so it is served unchecked here too.
- A wildcard host's store has the wildcard as its server name. The proxy picks a store by the
  client's server name, the exact one first, then the wildcards covering it, so an exact host
  without auth-tls-* under such a wildcard asks its clients for a certificate too, where
  nginx's server for that name asks for none (docs/migrating-from-ingress-nginx.md).
- A host passed through (ssl-passthrough) never reaches HTTP on the HTTPS port: no store.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field, replace

from coxswain_controller.translate.ingress.annotations.catalog import PREFIX
from coxswain_controller.translate.ingress.canaries import INVALID_ANNOTATION
from coxswain_controller.translate.ingress.lowering import ACME_CHALLENGES, Lowered
from coxswain_controller.translate.ingress.plans import IngressPlan
from coxswain_controller.translate.result import Event, ObjectRef
from coxswain_routing import (
    ClientCaStore,
    ClientCertificate,
    ClientValidationMode,
    Policy,
    RequestHeaderModifier,
    RequestRedirect,
    Rule,
)

__all__ = ["HEADERS", "ClientHosts", "HostCheck", "claim", "refusal"]

# What nginx sets from the client's certificate on every request it sends on (ingress-nginx's
# template, under `$server.CertificateAuth`); the certificate itself only when asked.
HEADERS = ("ssl-client-cert", "ssl-client-verify", "ssl-client-subject-dn", "ssl-client-issuer-dn")
VERIFY_HEADER = "ssl-client-verify"
# What decides a host's check: (ca.crt, asked, required, depth, error page, pass, match-cn).
Settings = tuple[bytes, bool, bool, int, str, bool, str]


@dataclass(frozen=True, slots=True)
class HostCheck:
    """How one host's clients are checked on the HTTPS port."""

    owner: ObjectRef  # the Ingress whose auth-tls-* configure the host
    settings: Settings
    store: ClientCaStore | None  # None: verify-client off (no certificate asked for)
    certificate: ClientCertificate | None  # on every rule of the host; None with no store

    def https(self, rule: Rule) -> Rule:
        if self.certificate is None:
            return scrubbed(rule, verified_none=True)
        policy = replace(rule.policy or Policy(), client_certificate=self.certificate)
        return replace(rule, policy=policy)


@dataclass
class ClientHosts:
    """Every host with client certificates, and what the Ingresses on them are told."""

    hosts: dict[str, HostCheck] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def stores(self) -> list[ClientCaStore]:
        return [c.store for c in self.hosts.values() if c.store is not None]

    def https(self, host: str, rules: list[Rule]) -> list[Rule]:
        """`rules` of `host` as the HTTPS port serves them."""
        check = self.hosts.get(host)
        return rules if check is None else [check.https(r) for r in rules]

    def http(self, host: str, rules: list[Rule]) -> list[Rule]:
        """`rules` of `host` as the HTTP port serves them: unchecked, the headers taken out."""
        return rules if host not in self.hosts else [scrubbed(r) for r in rules]


def refusal(plan: IngressPlan) -> str | None:
    """Why the Ingress's auth-tls-* cannot be honoured (a rule without a host), or None."""
    if plan.policy.client_tls is None or all(p.host or p.default for p in plan.paths):
        return None
    return (
        "auth-tls-secret: a rule without a host cannot have its clients' certificates checked: "
        "ingress-nginx checks them on its catch-all server, for every name no other host "
        "serves, and the Ingress HTTPS port cannot ask so few clients for a certificate"
    )


def claim(
    served: Sequence[tuple[IngressPlan, Lowered]], https_port: int, passed: Container[str]
) -> ClientHosts:
    """Each host's check from its oldest Ingress with auth-tls-secret (`served` are oldest
    first, each as lowered); hosts in `passed` (ssl-passthrough) get none."""
    found = ClientHosts()
    for plan, lowered in served:
        settings = _settings(plan)
        if settings is None or plan.client_ca is None:
            continue
        for host in sorted(h for h in lowered.https if h and h not in passed):
            if host not in found.hosts:
                found.hosts[host] = _check(plan, host, settings, plan.client_ca[1], https_port)
    for plan, lowered in served:
        found.events += _told(plan, lowered, found)
    return found


def scrubbed(rule: Rule, *, verified_none: bool = False) -> Rule:
    """`rule` sending on none of the ssl-client-* headers a client sent; `verified_none`: with
    ssl-client-verify NONE instead (nginx's value for a TLS connection with no certificate).
    A redirect sends nothing on, so it is left as it is."""
    if any(isinstance(f, RequestRedirect) for f in rule.filters):
        return rule
    setting = ((VERIFY_HEADER, "NONE"),) if verified_none else ()
    removing = tuple(h for h in HEADERS if not (verified_none and h == VERIFY_HEADER))
    filters = list(rule.filters)
    at = next((i for i, f in enumerate(filters) if isinstance(f, RequestHeaderModifier)), None)
    if at is None:
        filters.append(RequestHeaderModifier(set=setting, remove=removing))
    else:
        held = filters[at]
        assert isinstance(held, RequestHeaderModifier)
        filters[at] = replace(held, set=held.set + setting, remove=held.remove + removing)
    return replace(rule, filters=tuple(filters))


def _settings(plan: IngressPlan) -> Settings | None:
    spec, ca = plan.policy.client_tls, plan.client_ca
    if spec is None or ca is None:
        return None
    return (
        ca[0],
        spec.asked,
        spec.required,
        spec.depth,
        spec.error_page,
        spec.pass_certificate,
        spec.match_cn,
    )


def _check(
    plan: IngressPlan, host: str, settings: Settings, source: str, https_port: int
) -> HostCheck:
    spec = plan.policy.client_tls
    assert spec is not None
    if not spec.asked:
        return HostCheck(plan.ref, settings, None, None)
    mode = ClientValidationMode.ALLOW_VALID_OR_NONE
    store = ClientCaStore(https_port, settings[0], (source,), mode, host)
    certificate = ClientCertificate(
        store.key,
        required=spec.required,
        max_chain=spec.depth + 2,  # OpenSSL verify depth N: levels 0..N+1 (leaf, N CAs, anchor)
        subject=spec.match_cn,
        pass_certificate=spec.pass_certificate,
        error_page=spec.error_page,
    )
    return HostCheck(plan.ref, settings, store, certificate)


def _told(plan: IngressPlan, lowered: Lowered, found: ClientHosts) -> list[Event]:
    """Conflicted: each host another Ingress's auth-tls-* configure otherwise than this one's;
    a Warning: the hosts whose paths the HTTP port serves without a check."""
    events = []
    own = _settings(plan)
    for host in sorted(h for h in lowered.https if h in found.hosts):
        check = found.hosts[host]
        if check.owner != plan.ref and check.settings != own:
            events.append(
                Event(
                    plan.ref,
                    plan.uid,
                    "Warning",
                    "Conflicted",
                    f"{host}: its clients' certificates are checked as the auth-tls-* of "
                    f"Ingress {check.owner.namespace}/{check.owner.name} say, on every path of "
                    "the host: ingress-nginx configures them once per host, from the oldest "
                    "Ingress setting auth-tls-secret there",
                )
            )
    plain = sorted(h for h, rules in lowered.http.items() if _checked(found, h) and
                   any(_plain(r) for r in rules))  # fmt: skip
    if plain and plan.policy.client_tls is not None:
        message = (
            f"{PREFIX}auth-tls-secret: {', '.join(plain)} served on the HTTP port without "
            "client certificates, as ingress-nginx serves plain HTTP (it checks them only on "
            "TLS); ssl-redirect (with a TLS certificate for the host) or force-ssl-redirect "
            "sends those requests to HTTPS"
        )
        events.append(Event(plan.ref, plan.uid, "Warning", INVALID_ANNOTATION, message))
    return events


def _checked(found: ClientHosts, host: str) -> bool:
    check = found.hosts.get(host)
    return check is not None and check.store is not None


def _plain(rule: Rule) -> bool:
    """A rule answering a request itself rather than redirecting it (ACME challenges aside)."""
    if any(isinstance(f, RequestRedirect) for f in rule.filters):
        return False
    return not any(m.path.value.startswith(ACME_CHALLENGES) for m in rule.matches)
