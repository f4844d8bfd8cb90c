"""The TLS annotation groups: proxy-ssl-* (TLS to the backend), auth-tls-* (client
certificates), ssl-passthrough.

Where it sits: `groups.read_all` hands each group here the Ingress's honoured keys, after the
backend group (proxy-ssl-* mean something only with backend-protocol HTTPS or GRPCS). What is
read is the plain `BackendTlsSpec` / `ClientTlsSpec` of `model`, naming a Secret that
`ingress.tls_secrets` reads once the Ingress's namespace is known.

proxy-ssl-* as ingress-nginx reads them: nothing without proxy-ssl-secret; proxy-ssl-verify
"off" by default, proxy-ssl-name the upstream's own name by default (for ingress-nginx,
"upstream_balancer": no backend certificate carries it). Coxswain never connects to a backend
without verifying it, so only `verify: on` with a `proxy-ssl-name` can be honoured; anything
else refuses the key, and with it the Ingress's paths.

auth-tls-* as ingress-nginx reads them: nothing without auth-tls-secret; verify-client "on"
(default), "optional", "off" or "optional_no_ca"; verify-depth 1 by default (0 is read as the
default); error-page a URL the client is sent to; match-cn a regex that must begin "CN=".
optional_no_ca admits a certificate no CA of the Secret signed, which the proxy's verification
cannot (it fails every such handshake), so it is refused. An error page that is a path is
served by nginx in place of the error (an internal redirect), which Coxswain cannot: refused.
match-cn with verify-client "off" matches no subject (none is asked for: nginx answers every
request 403), so it is refused too. What the honoured values become on a host is
`ingress.client_tls`'s.

ssl-passthrough: "Because SSL Passthrough works on layer 4 of the OSI model (TCP) and not on
the layer 7 (HTTP), using SSL Passthrough invalidates all the other annotations set on an
Ingress object" (ingress-nginx's documentation), so on a passthrough Ingress every other key
groups read is ignored, and its values go back to their defaults.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields, replace

from coxswain_controller.translate.ingress.annotations import values
from coxswain_controller.translate.ingress.annotations.catalog import CATALOG, PREFIX, Fate
from coxswain_controller.translate.ingress.annotations.model import (
    BackendTlsSpec,
    ClientTlsSpec,
    Policy,
)
from coxswain_controller.translate.ingress.annotations.reader import Reader
from coxswain_controller.translate.ingress.annotations.values import BadValue
from coxswain_controller.translate.routes import wire_values

__all__ = ["read_tls", "secrets_named", "secret_ref"]

TLS_PROTOCOLS = ("HTTPS", "GRPCS")
BACKEND_KEYS = ("proxy-ssl-secret", "proxy-ssl-verify", "proxy-ssl-name", "proxy-ssl-server-name")
CLIENT_KEYS = (
    "auth-tls-secret",
    "auth-tls-verify-client",
    "auth-tls-verify-depth",
    "auth-tls-error-page",
    "auth-tls-pass-certificate-to-upstream",
    "auth-tls-match-cn",
)
VERIFY_CLIENT = ("on", "off", "optional", "optional_no_ca")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_LAYER_4 = "has no effect: ssl-passthrough relays the connection unread (as in ingress-nginx)"


def read_tls(r: Reader, p: Policy) -> None:
    _backend_tls(r, p)
    _client_tls(r, p)
    _passthrough(r, p)


def secret_ref(text: str) -> tuple[str, str]:
    """ingress-nginx's "namespace/secretName" (or a bare name): (namespace or "", name)."""
    value = text.strip()
    namespace, _, secret = value.rpartition("/")
    if not _NAME.fullmatch(secret) or (namespace and not _NAME.fullmatch(namespace)):
        raise BadValue("is not a Secret as namespace/name")
    return namespace, secret


def secrets_named(policy: Policy) -> tuple[tuple[str, str], ...]:
    """(namespace as written, "" for the Ingress's own; name) of every Secret the TLS
    annotations read: auth-tls-secret's and proxy-ssl-secret's."""
    found = [spec for spec in (policy.client_tls, policy.backend_tls) if spec is not None]
    return tuple(sorted({(spec.namespace, spec.secret) for spec in found}))


def _on_off(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise BadValue("is not on or off")
    return value == "on"


# --------------------------------------------------------------------------- proxy-ssl-*


def _backend_tls(r: Reader, p: Policy) -> None:
    if p.protocol not in TLS_PROTOCOLS:
        r.ignore_all(
            BACKEND_KEYS,
            "has no effect without backend-protocol HTTPS or GRPCS: the backend is spoken to "
            "in cleartext",
        )
        return
    if not r.has("proxy-ssl-secret"):
        r.ignore_all(BACKEND_KEYS[1:], "has no effect without proxy-ssl-secret")
        return
    secret = r.attempt("proxy-ssl-secret", secret_ref)
    verify = r.attempt("proxy-ssl-verify", _on_off) if r.has("proxy-ssl-verify") else False
    name = r.attempt("proxy-ssl-name", _backend_name) or ""
    _server_name(r)
    if secret is None or verify is None or (r.has("proxy-ssl-name") and not name):
        return  # each refused, saying why
    if not verify:
        target = "proxy-ssl-verify" if r.has("proxy-ssl-verify") else "proxy-ssl-secret"
        r.bad(
            target,
            'leaves proxy-ssl-verify "off" (ingress-nginx\'s default): ingress-nginx would '
            "connect to the backend without verifying its certificate, which Coxswain never "
            'does; set proxy-ssl-verify: "on" and proxy-ssl-name',
        )
        return
    if not name:
        r.bad(
            "proxy-ssl-verify",
            "needs proxy-ssl-name: without it ingress-nginx verifies the backend against the "
            "name of its upstream block, which no backend certificate carries",
        )
        return
    for key in BACKEND_KEYS[:3]:
        r.honour(key)
    p.backend_tls = BackendTlsSpec(secret[1], secret[0], name)


def _backend_name(text: str) -> str:
    name = text.strip().lower()
    problem = wire_values.precise_hostname_problem(name)
    if problem is not None:
        raise BadValue(f"is not a host name ({problem})")
    return name


def _server_name(r: Reader) -> None:
    """proxy-ssl-server-name: "on" is what the proxy does; "off" (nginx sends no server name)
    it cannot do, and sending the name verified changes nothing a backend serving that name
    answers with."""
    sni = r.attempt("proxy-ssl-server-name", _on_off)
    if sni is True:
        r.honour("proxy-ssl-server-name")
    elif sni is False:
        r.ignore(
            "proxy-ssl-server-name",
            "off is not honoured: the proxy always sends proxy-ssl-name as the server name",
        )


# ----------------------------------------------------------------------------- auth-tls-*


def _client_tls(r: Reader, p: Policy) -> None:
    if not r.has("auth-tls-secret"):
        r.ignore_all(CLIENT_KEYS[1:], "has no effect without auth-tls-secret")
        return
    secret = r.attempt("auth-tls-secret", secret_ref)
    verify = r.attempt("auth-tls-verify-client", _verify_client) or "on"
    depth = r.attempt("auth-tls-verify-depth", _depth) or 1
    page = r.attempt("auth-tls-error-page", _error_page) or ""
    passing = r.attempt("auth-tls-pass-certificate-to-upstream", values.boolean)
    match_cn = r.attempt("auth-tls-match-cn", _match_cn) or ""
    if match_cn and verify == "off":
        r.bad(
            "auth-tls-match-cn",
            'asks a subject of a certificate auth-tls-verify-client "off" never asks for: '
            "ingress-nginx answers every request 403",
        )
    read = [k for k in CLIENT_KEYS if r.has(k)]
    refused = _refused(r, read)
    for key in read:
        if key not in refused:  # each key judged, though one refused leaves none served
            r.honour(key, _client_note(key, verify))
    if secret is None or refused:
        return
    p.client_tls = ClientTlsSpec(
        secret[1],
        secret[0],
        required=verify == "on",
        depth=depth,
        error_page=page,
        pass_certificate=bool(passing),
        match_cn=match_cn,
        asked=verify != "off",
    )


def _refused(r: Reader, keys: list[str]) -> list[str]:
    refused = {v.key for v in r.policy.verdicts if v.fate is Fate.REFUSED}
    return [k for k in keys if PREFIX + k in refused]


def _client_note(key: str, verify: str) -> str:
    if verify == "off" and key != "auth-tls-verify-client":
        return CATALOG[key].note + '; with verify-client "off" no certificate is asked for'
    return CATALOG[key].note


def _verify_client(text: str) -> str:
    value = text.strip()
    if value not in VERIFY_CLIENT:
        raise BadValue(f"is not one of {', '.join(VERIFY_CLIENT)}")
    if value == "optional_no_ca":
        raise BadValue(
            "asks that a certificate no CA of auth-tls-secret signed be admitted, which the "
            "proxy cannot: it verifies every certificate it is given"
        )
    return value


def _depth(text: str) -> int:
    depth = values.integer(text, low=0, high=100)
    return depth or 1  # ingress-nginx reads 0 as its default


def _error_page(text: str) -> str:
    page = text.strip()
    if page.startswith("/"):
        raise BadValue(
            "is a path, which nginx serves in place of the error (an internal redirect); "
            "Coxswain can only redirect the client to an absolute http(s) URL"
        )
    if "$" in page:
        raise BadValue("names an nginx variable; the error page is read as a fixed URL")
    if not page.startswith(("http://", "https://")) or any(
        not 0x21 <= ord(c) <= 0x7E for c in page
    ):
        raise BadValue("is not an absolute http(s) URL")
    return page


def _match_cn(text: str) -> str:
    pattern = text.strip()
    if not pattern.startswith("CN="):
        raise BadValue('does not begin "CN=", as ingress-nginx requires')
    try:
        re.compile(pattern)
    except re.error as exc:
        raise BadValue(f"is not a regular expression Coxswain can read ({exc})") from None
    return pattern


# ------------------------------------------------------------------------- ssl-passthrough


def _passthrough(r: Reader, p: Policy) -> None:
    wanted = r.attempt("ssl-passthrough", values.boolean)
    if wanted is False:
        r.ignore("ssl-passthrough", "off, which is what Coxswain does")
    if not wanted:
        return
    r.honour("ssl-passthrough")
    p.passthrough = True
    read: Mapping[str, tuple[str, str]] = r.found
    for i, verdict in enumerate(p.verdicts):
        name = verdict.key.removeprefix(PREFIX)
        if name in read and name != "ssl-passthrough":
            p.verdicts[i] = replace(verdict, fate=Fate.IGNORED, note=_LAYER_4)
    fresh = Policy()
    for f in fields(Policy):
        if f.name not in ("verdicts", "passthrough"):
            setattr(p, f.name, getattr(fresh, f.name))
