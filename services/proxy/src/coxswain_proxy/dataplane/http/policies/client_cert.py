"""A rule's client certificate check (ingress-nginx's auth-tls-*), per request.

Where it sits: `gate.admit` runs `admit` first of all a rule's stages when its policy has a
`ClientCertificate` (`compiled_policy.ClientCheck`); a rule without one pays the attribute test
`gate` makes for it. The connection knows which store its handshake verified the client under
and what the client presented (`contracts.Downstream.verified`, a `peercert.ClientPeer`, read
once per connection). What is checked is what nginx checks per request of a server verifying
clients (`ngx_http_process_request`), in its order:

- a connection not verified under the rule's store (its server name chose another host, or one
  that asks for no certificate): 421, as nginx answers a Host whose server verifies clients
  otherwise than the one the server name chose (RFC 9110 §15.5.20: "the request was directed at
  a server that is unable or unwilling to produce an authoritative response");
- no certificate, when one is required: 400 (nginx's 496), or a 302 to the error page;
- a verified chain longer than the rule admits (nginx's ssl_verify_depth, its 495): 400, or the
  error page. The proxy rebuilds the chain against the bundle (`peercert`): one it cannot
  rebuild is refused so too;
- a subject DN in which the rule's pattern finds no match (auth-tls-match-cn): 403, as
  ingress-nginx's `if ($ssl_client_s_dn !~ ...) { return 403; }`; with no certificate the DN
  is empty, as nginx's is.

Then the request goes on with ssl-client-verify (SUCCESS or NONE), ssl-client-subject-dn,
ssl-client-issuer-dn and, when the rule passes it, ssl-client-cert (the PEM, URL-escaped):
whatever the client sent under those four names is dropped first, so a backend trusting them
reads only what the proxy verified.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coxswain_proxy.dataplane import peercert
from coxswain_proxy.dataplane.http.policies import answers

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.http.policies.compiled_policy import ClientCheck
    from coxswain_proxy.dataplane.http.policies.policed import PolicedCycle

__all__ = ["admit"]


def admit(cycle: PolicedCycle, check: ClientCheck) -> bool:
    """Whether the request goes on (its fields set), or was answered here."""
    verified = cycle.conn.verified
    if verified is None or verified.key != check.store:
        answers.refuse(cycle, 421, "the connection's TLS server name is not this host's")
        return False
    peer = verified.certificate()
    if peer is None:
        if check.required:
            _certificate_error(cycle, check, "no required SSL certificate was sent")
            return False
    elif check.max_chain and not 0 < peer.chain <= check.max_chain:
        _certificate_error(cycle, check, "the SSL certificate's chain is longer than allowed")
        return False
    subject = check.subject
    if subject is not None and subject.search(peer.subject if peer is not None else "") is None:
        answers.refuse(cycle, 403, "client certificate unauthorized")
        return False
    cycle.headers = _with_fields(cycle.headers, peer, check.passes)
    return True


def _certificate_error(cycle: PolicedCycle, check: ClientCheck, reason: str) -> None:
    if check.error_page is not None:
        answers.refuse(cycle, 302, reason, check.error_page)
    else:
        answers.refuse(cycle, 400, reason)


def _with_fields(
    headers: list[tuple[bytes, bytes]], peer: peercert.PeerCertificate | None, passes: bool
) -> list[tuple[bytes, bytes]]:
    names = peercert.FIELD_NAMES
    kept = [(n, v) for n, v in headers if n.lower() not in names]
    if peer is None:
        kept.extend(peercert.NONE_FIELDS)
        return kept
    kept.extend(peer.fields)
    if passes:
        kept.append((peercert.CERT, peer.escaped))
    return kept
