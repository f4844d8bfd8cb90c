"""Every ingress-nginx annotation, and what Coxswain does with it.

Where it sits: `read` looks each `nginx.ingress.kubernetes.io/*` key of an Ingress up here to
learn its fate before `policy` turns the honoured ones into routing; the migration report and
docs/migrating-from-ingress-nginx.md list the same table, so the three never disagree.

The fates, and why there are exactly these:
- honoured: mapped onto the routing model; a value that cannot be honoured refuses the Ingress.
- ignored: accepted with no effect, because ignoring it serves the Ingress as ingress-nginx
  would in every way a client can tell (buffering, logging, tracing), or because the proxy
  already does what it asks in its own way. Each still gets an InvalidAnnotation Event.
- refused: the Ingress's paths are not served. Snippets are never run (CVE-2025-1974 came from
  them); what is not built yet is security or behaviour relevant (parts of auth, limits and
  affinity): serving without it would be serving wrong, so not serving is the safe answer
  until it is built.

The set is ingress-nginx's own (its docs/user-guide/nginx-configuration/annotations-risk.md,
plus the older names still seen in manifests); ingress-nginx is archived, so it is closed. A key
with the prefix that is not here is unknown: ignored, with an Event.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CATALOG", "HARMLESS_VALUES", "PREFIX", "Entry", "Fate", "OFF_IS_HARMLESS", "entry"]

PREFIX = "nginx.ingress.kubernetes.io/"


class Fate(StrEnum):
    HONOURED = "honoured"
    IGNORED = "ignored"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Entry:
    group: str  # the docs table's grouping
    fate: Fate
    note: str  # how it is honoured, or why it is ignored or refused
    never: bool = False  # a snippet: refused for good, not "not supported yet"


def _h(group: str, note: str) -> Entry:
    return Entry(group, Fate.HONOURED, note)


def _i(group: str, note: str) -> Entry:
    return Entry(group, Fate.IGNORED, note)


def _later(group: str, note: str) -> Entry:
    return Entry(group, Fate.REFUSED, f"not supported yet: {note}")


SNIPPET = "snippets are never run: raw nginx configuration is what CVE-2025-1974 came through"
BUFFERING = "the proxy streams request and response bodies; buffering changes nothing a client sees"
AUTH = "this part of external authentication is not built yet"
AFFINITY = "this part of session affinity is not built yet"
TRACING = "the proxy's own logs and metrics apply; it sends no traces"

_ENTRIES: dict[str, Entry] = {
    # Rewrite and regex paths
    "rewrite-target": _h(
        "Rewrite",
        "a URLRewrite: the whole path becomes the target (nginx rewrite), $1..$9 from the "
        "path's regex; the host's paths become case-insensitive regexes anchored at the start",
    ),
    "use-regex": _h(
        "Rewrite", "every path on the host is a case-insensitive regex anchored at the start"
    ),
    "app-root": _h("Rewrite", "a 302 redirect of exactly / to the app root, on each host"),
    "preserve-trailing-slash": _i("Rewrite", "Coxswain's HTTPS redirect keeps the path as it is"),
    "ssl-redirect": _h(
        "Rewrite",
        "a 308 redirect to HTTPS on the HTTP port for hosts with a TLS certificate (default on)",
    ),
    "force-ssl-redirect": _h(
        "Rewrite", "a 308 redirect to HTTPS on the HTTP port, with or without TLS"
    ),
    "use-port-in-redirects": _i("Rewrite", "Coxswain's redirects name the listener's port"),
    # Redirects
    "permanent-redirect": _h("Redirect", "a RequestRedirect to the URL (301 by default)"),
    "permanent-redirect-code": _h("Redirect", "the permanent redirect's status"),
    "temporal-redirect": _h("Redirect", "a RequestRedirect to the URL (302 by default)"),
    "temporal-redirect-code": _h("Redirect", "the temporal redirect's status"),
    "from-to-www-redirect": _later("Redirect", "the www. redirect is not built yet"),
    # Timeouts and retries
    "proxy-connect-timeout": _i(
        "Timeouts", "the proxy's upstream connect timeout is process-wide (5 s, as nginx's default)"
    ),
    "proxy-read-timeout": _h(
        "Timeouts",
        "timeouts.backendRequest (the larger of read and send): a bound on each attempt's whole "
        "exchange, where nginx bounds the silence between two reads",
    ),
    "proxy-send-timeout": _h("Timeouts", "timeouts.backendRequest, with proxy-read-timeout"),
    "proxy-next-upstream": _i("Timeouts", "retries follow an HTTPRoute's retry only"),
    "proxy-next-upstream-timeout": _i("Timeouts", "retries follow an HTTPRoute's retry only"),
    "proxy-next-upstream-tries": _i("Timeouts", "retries follow an HTTPRoute's retry only"),
    # CORS
    "enable-cors": _h("CORS", "a CORS filter, with ingress-nginx's defaults"),
    "cors-allow-origin": _h("CORS", "allowOrigins (default *)"),
    "cors-allow-methods": _h("CORS", "allowMethods"),
    "cors-allow-headers": _h("CORS", "allowHeaders"),
    "cors-expose-headers": _h("CORS", "exposeHeaders"),
    "cors-allow-credentials": _h("CORS", "allowCredentials (default true)"),
    "cors-max-age": _h("CORS", "maxAge (default 1728000)"),
    # Request headers
    "upstream-vhost": _h("Headers", "a URLRewrite of the Host header"),
    "x-forwarded-prefix": _h("Headers", "a RequestHeaderModifier setting X-Forwarded-Prefix"),
    "custom-headers": _later("Headers", "response headers from a ConfigMap are not built yet"),
    "connection-proxy-header": _i("Headers", "the proxy manages upstream connections itself"),
    "proxy-http-version": _i("Headers", "the proxy speaks HTTP/1.1 to HTTP backends"),
    "proxy-redirect-from": _later("Headers", "rewriting a backend's Location is not built yet"),
    "proxy-redirect-to": _later("Headers", "rewriting a backend's Location is not built yet"),
    "proxy-cookie-domain": _later("Headers", "rewriting Set-Cookie is not built yet"),
    "proxy-cookie-path": _later("Headers", "rewriting Set-Cookie is not built yet"),
    # Backends
    "backend-protocol": _h(
        "Backends",
        "HTTP, H2C and GRPC onto the backend's protocol; HTTPS and GRPCS with the TLS "
        "proxy-ssl-* or a BackendTLSPolicy on the Service gives (AJP, FCGI and AUTO_HTTP "
        "refused)",
    ),
    "service-upstream": _i("Backends", "the proxy balances over the Service's endpoints"),
    "load-balance": _i("Backends", "the proxy balances by weighted round robin"),
    "upstream-hash-by": _later("Backends", "consistent hashing is not built yet"),
    "upstream-hash-by-subset": _later("Backends", "consistent hashing is not built yet"),
    "upstream-hash-by-subset-size": _later("Backends", "consistent hashing is not built yet"),
    "default-backend": _later("Backends", "a per-Ingress default backend is not built yet"),
    "custom-http-errors": _later("Backends", "custom error pages are not built yet"),
    "disable-proxy-intercept-errors": _i("Backends", "the proxy never intercepts errors"),
    "fastcgi-index": _later("Backends", "FastCGI backends are not built"),
    "fastcgi-params-configmap": _later("Backends", "FastCGI backends are not built"),
    # Canary
    "canary": _h("Canary", "this Ingress's paths become a share of the main Ingress's"),
    "canary-weight": _h("Canary", "weighted backendRefs: weight against the total"),
    "canary-weight-total": _h("Canary", "the weights' total (default 100)"),
    "canary-by-header": _h(
        "Canary", "a rule matching the header: always to the canary, never to the main Ingress"
    ),
    "canary-by-header-value": _h("Canary", "a rule matching the header's exact value"),
    "canary-by-header-pattern": _h("Canary", "a rule matching the header by regex"),
    "canary-by-cookie": _h(
        "Canary",
        "the cookie's value always sends to the canary, never to the main Ingress, ahead of "
        "the weights (after canary-by-header)",
    ),
    # TLS
    "ssl-passthrough": _h(
        "TLS",
        "each host's TLS connections are relayed unread, by the server name (exact hosts only, "
        "as ingress-nginx), to the Service port of its path /; other paths and every other "
        "annotation are ignored, and nothing is served on the HTTP port",
    ),
    "ssl-ciphers": _i("TLS", "the proxy's TLS settings apply"),
    "ssl-prefer-server-ciphers": _i("TLS", "the proxy's TLS settings apply"),
    # Backend TLS
    "proxy-ssl-secret": _h(
        "Backend TLS",
        "with backend-protocol HTTPS or GRPCS: a Secret of the Ingress's namespace "
        "(namespace/name); its ca.crt is the whole of the trust for the backend (as a "
        "BackendTLSPolicy's caCertificateRefs), its tls.crt and tls.key, when present, the "
        "client certificate presented to it",
    ),
    "proxy-ssl-verify": _h(
        "Backend TLS",
        'must be "on": Coxswain never connects to a backend without verifying it ("off", the '
        "default, is refused)",
    ),
    "proxy-ssl-name": _h("Backend TLS", "the name verified and sent as SNI (needed with verify)"),
    "proxy-ssl-server-name": _h(
        "Backend TLS", "on: what the proxy does; off is ignored (the name is always sent)"
    ),
    "proxy-ssl-protocols": _i("Backend TLS", "the proxy offers TLS 1.2 and 1.3 to backends"),
    "proxy-ssl-ciphers": _i("Backend TLS", "the proxy's own TLS client ciphers apply"),
    "proxy-ssl-verify-depth": _i(
        "Backend TLS", "the chain is verified up to a CA of ca.crt at whatever depth"
    ),
    "auth-tls-secret": _h(
        "Client certificates",
        "a Secret of the Ingress's namespace (namespace/name): its ca.crt is the whole of the "
        "trust for client certificates of each host of the Ingress, asked for in the handshake "
        "on the HTTPS port (a certificate given must chain to it, or the handshake fails); "
        "requests sent on carry ssl-client-verify, ssl-client-subject-dn and "
        "ssl-client-issuer-dn. As in ingress-nginx, the oldest Ingress setting it on a host "
        "decides for every path of that host, and plain HTTP is not checked; a rule without a "
        "host is refused",
    ),
    "auth-tls-verify-client": _h(
        "Client certificates",
        "on (the default): a request without a certificate is answered 400 (or sent to the "
        "error page); optional: it is sent on with ssl-client-verify NONE; off: no certificate "
        "is asked for; optional_no_ca is refused",
    ),
    "auth-tls-verify-depth": _h(
        "Client certificates",
        "the longest chain admitted is the depth plus two, as OpenSSL counts it (the "
        "certificate, one intermediate and the CA, by default); a longer one is answered 400 "
        "(or sent to the error page)",
    ),
    "auth-tls-error-page": _h(
        "Client certificates",
        "an absolute http(s) URL: the 400 becomes a 302 to it; a path (an nginx internal "
        "redirect) is refused",
    ),
    "auth-tls-pass-certificate-to-upstream": _h(
        "Client certificates", "the certificate's PEM, URL-escaped, in ssl-client-cert"
    ),
    "auth-tls-match-cn": _h(
        "Client certificates",
        'a regex ("CN=..."): a subject DN it finds no match in is answered 403',
    ),
    # Buffering
    **{
        k: _i("Buffering", BUFFERING)
        for k in (
            "proxy-buffering",
            "proxy-buffer-size",
            "proxy-buffers-number",
            "proxy-busy-buffers-size",
            "proxy-max-temp-file-size",
            "proxy-request-buffering",
            "client-body-buffer-size",
        )
    },
    # Limits and access
    "proxy-body-size": _h(
        "Limits",
        "a body size limit (nginx sizes: 8m, 512k, 1g; 0 is none): 413 for a larger "
        "Content-Length, and a chunked body cut off with 413 as it grows past it",
    ),
    "limit-rps": _h(
        "Limits",
        "a token bucket per client address: the rate per second, a burst of rate times "
        "limit-burst-multiplier; 429 with Retry-After past it (ingress-nginx answers 503)",
    ),
    "limit-rpm": _h("Limits", "as limit-rps, per minute; with both set, both apply"),
    "limit-burst-multiplier": _h("Limits", "the burst as a multiple of the rate (default 5)"),
    "limit-connections": _h(
        "Limits", "requests in flight per client address on the path (nginx's limit_conn); 429"
    ),
    **{
        f"limit-{k}": _h("Limits", "CIDRs the rate limits never apply to")
        for k in ("allowlist", "whitelist")
    },
    **{
        f"limit-{k}": _later("Limits", "response bandwidth limits are not built yet")
        for k in ("rate", "rate-after")
    },
    **{
        k: _later("Limits", "global rate limits are not built yet")
        for k in (
            "global-rate-limit",
            "global-rate-limit-window",
            "global-rate-limit-key",
            "global-rate-limit-ignored-cidrs",
        )
    },
    **{
        f"{k}-source-range": _h(
            "Access",
            "only clients in these CIDRs are served, by the connection's peer address; "
            "others get 403",
        )
        for k in ("whitelist", "allowlist")
    },
    "denylist-source-range": _h(
        "Access", "clients in these CIDRs get 403, whatever the allow list says"
    ),
    # Authentication
    "auth-type": _h(
        "Authentication", "basic (htpasswd hashes: bcrypt, apr1, {SHA}); digest refused"
    ),
    "auth-secret": _h(
        "Authentication", "the Secret of the Ingress's namespace holding the htpasswd entries"
    ),
    "auth-secret-type": _h("Authentication", "auth-file (the key auth) or auth-map (user: hash)"),
    "auth-realm": _h("Authentication", "the realm of WWW-Authenticate"),
    "auth-url": _h(
        "Authentication",
        "an http URL of a Service (<name>.<namespace>.svc[.cluster.local][:port]/path), or "
        "http(s)://$host[:port]/path (the Service that the request's host serves that path "
        "from, found per host when translating): the request's head is sent there first; 2xx "
        "lets it through, 401 and 403 answer it",
    ),
    "auth-signin": _h(
        "Authentication",
        "on the auth service's 401, a 302 to this URL ($host, $scheme, $request_uri and "
        "$escaped_request_uri filled in), with rd= the original URL",
    ),
    "auth-signin-redirect-param": _h("Authentication", "the sign-in URL's parameter (default rd)"),
    "auth-response-headers": _h(
        "Authentication", "fields of the auth service's 2xx answer set on the request sent on"
    ),
    "auth-method": _h("Authentication", "the auth request's method (default GET)"),
    **{
        f"auth-{k}": _later("Authentication", AUTH)
        for k in (
            "request-redirect",
            "cache-key",
            "cache-duration",
            "keepalive-share-vars",
            "proxy-set-headers",
            "always-set-cookie",
        )
    },
    **{
        f"auth-{k}": _i("Authentication", "the proxy keeps its auth connections alive itself")
        for k in ("keepalive", "keepalive-requests", "keepalive-timeout")
    },
    "satisfy": _later("Authentication", "satisfy any (auth or address) is not built yet"),
    "enable-global-auth": _i("Authentication", "Coxswain has no global authentication to skip"),
    # Affinity
    "affinity": _h(
        "Affinity",
        "cookie: the proxy sets a cookie naming the endpoint that served the client, "
        "and sends it there while that endpoint is ready",
    ),
    "affinity-mode": _i("Affinity", "the cookie's endpoint is kept while it is ready, as balanced"),
    "affinity-canary-behavior": _later("Affinity", AFFINITY),
    "session-cookie-name": _h("Affinity", "the cookie's name (default INGRESSCOOKIE)"),
    "session-cookie-path": _h("Affinity", "its Path (default the Ingress path; / for regexes)"),
    "session-cookie-max-age": _h("Affinity", "its Max-Age, in seconds"),
    "session-cookie-expires": _h("Affinity", "its Expires, in seconds from the answer"),
    "session-cookie-samesite": _h("Affinity", "its SameSite: None, Lax or Strict"),
    "session-cookie-secure": _h("Affinity", "its Secure attribute"),
    **{
        f"session-cookie-{k}": _later("Affinity", AFFINITY)
        for k in (
            "domain",
            "partitioned",
            "change-on-failure",
            "conditional-samesite-none",
        )
    },
    # Hosts and mirrors
    "server-alias": _later("Hosts", "host aliases are not built yet"),
    "mirror-target": _later("Mirror", "mirroring to a URL is not built yet"),
    "mirror-host": _later("Mirror", "mirroring to a URL is not built yet"),
    "mirror-request-body": _later("Mirror", "mirroring to a URL is not built yet"),
    # ModSecurity
    "enable-modsecurity": _later("ModSecurity", "Coxswain has no web application firewall"),
    "enable-owasp-core-rules": _later("ModSecurity", "Coxswain has no web application firewall"),
    "modsecurity-transaction-id": _later("ModSecurity", "Coxswain has no web application firewall"),
    # Snippets
    **{
        k: Entry("Snippets", Fate.REFUSED, SNIPPET, never=True)
        for k in (
            "configuration-snippet",
            "server-snippet",
            "auth-snippet",
            "stream-snippet",
            "modsecurity-snippet",
        )
    },
    # Observability
    **{
        k: _i("Observability", TRACING)
        for k in (
            "enable-opentelemetry",
            "opentelemetry-operation-name",
            "opentelemetry-trust-incoming-span",
            "enable-opentracing",
            "opentracing-trust-incoming-span",
        )
    },
    "enable-access-log": _i(
        "Observability",
        "the access log is asked for per IngressClass (CoxswainIngressClassParameters.accessLog) "
        "or by a CoxswainPolicy",
    ),
    "enable-rewrite-log": _i("Observability", "the proxy keeps no rewrite log"),
    "http2-push-preload": _i("Observability", "browsers no longer take HTTP/2 push"),
}

CATALOG: dict[str, Entry] = dict(sorted(_ENTRIES.items()))

# Refused features whose "off" value asks for nothing: "false" is ignored, not refused.
OFF_IS_HARMLESS = frozenset(
    {
        "from-to-www-redirect",
        "enable-modsecurity",
        "enable-owasp-core-rules",
        "session-cookie-change-on-failure",
        "session-cookie-conditional-samesite-none",
        "session-cookie-partitioned",
    }
)

# Refused features with a value that is ingress-nginx's own default, asking for nothing either:
# `proxy_redirect off` leaves a backend's Location alone, as Coxswain does; `satisfy all` needs
# every check to pass, as Coxswain's do. Those values are ignored, not refused.
HARMLESS_VALUES: dict[str, frozenset[str]] = {
    "proxy-redirect-from": frozenset({"off"}),
    "proxy-redirect-to": frozenset({"off"}),
    "satisfy": frozenset({"all"}),
}


def entry(name: str) -> Entry | None:
    """The catalog entry of an annotation name without the prefix; None: unknown."""
    return CATALOG.get(name)


def markdown_table() -> str:
    """The catalog as docs/migrating-from-ingress-nginx.md's "Every annotation" table: groups
    in the catalog's order, keys sorted within each (`catalog_test` holds the doc to it)."""
    groups: dict[str, list[str]] = {}
    for name, found in _ENTRIES.items():
        groups.setdefault(found.group, []).append(name)
    lines = ["| annotation | fate | what Coxswain does |", "| --- | --- | --- |"]
    for group, names in groups.items():
        lines.append(f"| **{group}** | | |")
        for name in sorted(names):
            found = CATALOG[name]
            lines.append(f"| `{name}` | {_fate(found)} | {found.note.removeprefix(_LATER)} |")
    return "\n".join(lines) + "\n"


_LATER = "not supported yet: "


def _fate(found: Entry) -> str:
    if found.fate is not Fate.REFUSED:
        return found.fate.value
    return "**refused**, never" if found.never else "**refused**, not yet"
