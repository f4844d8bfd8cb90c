"""A rule's client certificate check (`Policy.client_certificate`): ingress-nginx's auth-tls-*.

Where it sits: the controller gives every rule of an Ingress host whose client certificates are
validated (auth-tls-secret) this part, on the HTTPS port; the host's TLS server name has its own
`ClientCaStore` (mode `ALLOW_VALID_OR_NONE`), under which the handshake asked for a certificate
and verified one given. The proxy checks per request, after routing, what nginx checks per
request of a server with `ssl_verify_client` (its `ngx_http_process_request`):

- the connection must have been validated under `store`: a client whose TLS server name chose
  another host (or none that asks for certificates) is answered 421, as nginx answers a Host
  whose server verifies clients differently from the one the server name chose;
- no certificate, when `required`: 400, or a 302 to `error_page` (nginx's 496);
- a verified chain longer than `max_chain` (nginx's ssl_verify_depth): 400 or the error page
  (nginx's 495);
- a subject DN in which `subject` finds no match (auth-tls-match-cn): 403;

and then sets ssl-client-verify (SUCCESS or NONE), ssl-client-subject-dn, ssl-client-issuer-dn
and, with `pass_certificate`, ssl-client-cert (the PEM, URL-escaped) on the request sent on,
replacing whatever the client sent under those names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from coxswain_routing import _values
from coxswain_routing._problem import Problem

__all__ = ["ClientCertificate"]


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    store: str  # the key of the ClientCaStore the connection must have been validated under
    required: bool = True  # no certificate: 400 (or the error page); False: sent on as NONE
    max_chain: int = 0  # the longest verified chain admitted, leaf and CA included; 0: any
    subject: str = ""  # a regex the subject DN must contain a match of; "": any subject
    pass_certificate: bool = False  # the certificate's PEM, URL-escaped, in ssl-client-cert
    error_page: str = ""  # the 302's Location instead of a 400; "": answered 400

    def validate(self, at: str) -> list[Problem]:
        problems = self.value_problems(at)
        if not self.store.startswith("client-ca/"):
            problems.append(Problem(f"{at}.store", "is not the key of a ClientCaStore"))
        if self.max_chain < 0:
            problems.append(Problem(f"{at}.maxChain", "must not be negative"))
        if self.subject:
            try:
                re.compile(self.subject)
            except re.error as exc:
                problems.append(Problem(f"{at}.subject", f"is not a regular expression: {exc}"))
        return problems

    def value_problems(self, at: str) -> list[Problem]:
        page = self.error_page
        if page and (not page.isascii() or any(not 0x21 <= ord(c) <= 0x7E for c in page)):
            return [Problem(f"{at}.errorPage", "holds characters a Location may not")]
        problem = _values.field_value(page) if page else None
        return [Problem(f"{at}.errorPage", problem)] if problem is not None else []
