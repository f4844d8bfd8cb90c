"""The IssueSvid servicer: request, token, allowlist, CSR, signature, in that order; errors
become codes.

This is the gRPC boundary, and the caller is anyone who can reach the port: `coxswain_proto.rpc`
refuses malformed bytes (INVALID_ARGUMENT, told to `malformed` for the counter and the log),
and `validate.request` checks each field before anything else reads it. Everything beneath
raises `errors.IdentityError` subclasses; here each becomes its status code, its counter label
and one log line naming the ServiceAccount (never the token). Anything else is a bug: that call
alone ends INTERNAL with fixed text, the traceback goes to the log, and the counter says
`internal`. Blocking work (the API server, signing) runs in worker threads.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from coxswain_identity import csr, errors, metrics, tokens, validate
from coxswain_identity.ca import Authority
from coxswain_proto import identity, rpc

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Policy:
    trust_domain: str  # --trust-domain: spiffe://<this>/ns/<ns>/sa/<sa>
    svid_ttl: datetime.timedelta  # --svid-ttl: an SVID's lifetime, capped by the CA's


@dataclass(frozen=True, slots=True)
class Decision:
    """What one call came to, for the counter and the log line."""

    result: str  # the counter's label
    service_account: str  # "ns/name", or "" when the token never said whose it was
    detail: str  # why, for a refusal; the SPIFFE ID, for an SVID


class Issuer:
    """IssueSvid (`issue`); `authority()` is the CA loaded right now, or None."""

    def __init__(
        self,
        authority: Callable[[], Authority | None],
        auth: Any,
        allowlist: tokens.Allowlist,
        *,
        policy: Policy,
    ) -> None:
        self._authority = authority
        self._auth = auth
        self._allowlist = allowlist
        self._policy = policy

    async def issue(
        self, request: identity.IssueSvidRequest, context: grpc.aio.ServicerContext
    ) -> identity.IssueSvidResponse:
        started = time.perf_counter()
        sa: tokens.ServiceAccount | None = None
        try:
            invalid = validate.request(request)
            if invalid is not None:
                raise invalid
            authority = self._require_authority()
            sa = await asyncio.to_thread(tokens.review, self._auth, request.token)
            await asyncio.to_thread(self._allowlist.check, sa)
            response, uri = await asyncio.to_thread(self._sign, request.csr_pem, sa, authority)
        except errors.IdentityError as err:
            self._record(Decision(err.result, str(sa or ""), str(err)), context, started)
            await context.abort(err.code, str(err))
        except Exception:
            log.exception("IssueSvid failed", extra={"fields": {"peer": context.peer()}})
            self._record(Decision("internal", str(sa or ""), rpc.INTERNAL_DETAIL), context, started)
            await context.abort(grpc.StatusCode.INTERNAL, rpc.INTERNAL_DETAIL)
        self._record(Decision("issued", str(sa), uri), context, started)
        return response

    def malformed(self, err: rpc.MalformedMessage, context: grpc.aio.ServicerContext) -> None:
        """Told of a request that was not a well-formed IssueSvidRequest (rpc answers it)."""
        self._record(Decision("invalid_argument", "", err.detail), context, time.perf_counter())

    def add_to(self, server: grpc.aio.Server) -> None:
        """Serve IssueSvid on `server`, malformed requests counted and logged here."""
        rpc.add_identity_handler(server, self.issue, on_malformed=self.malformed)

    def _require_authority(self) -> Authority:
        authority = self._authority()
        if authority is None:
            # Fail closed: without a CA this service serves nothing.
            raise errors.Unavailable("no certificate authority loaded")
        return authority

    def _sign(
        self, csr_pem: bytes, sa: tokens.ServiceAccount, authority: Authority
    ) -> tuple[identity.IssueSvidResponse, str]:
        """Blocking (CPU): check the CSR, then sign for the ServiceAccount, whatever it asked."""
        request_csr = csr.check(csr_pem)
        uri = csr.spiffe_id(self._policy.trust_domain, sa.namespace, sa.name)
        now = datetime.datetime.now(datetime.UTC)
        svid = csr.sign(request_csr, authority, uri, ttl=self._policy.svid_ttl, now=now)
        response = identity.IssueSvidResponse(
            certificate_chain_pem=svid.chain_pem,
            trust_bundle_pem=authority.bundle_pem,
            not_after_seconds=int(svid.certificate.not_valid_after_utc.timestamp()),
        )
        return response, uri

    def _record(
        self, decision: Decision, context: grpc.aio.ServicerContext, started: float
    ) -> None:
        metrics.ISSUANCE.labels(result=decision.result).inc()
        metrics.LATENCY.observe(time.perf_counter() - started)
        fields = {
            "result": decision.result,
            "service_account": decision.service_account,
            "detail": decision.detail,
            "peer": context.peer(),
        }
        level = logging.INFO if decision.result == "issued" else logging.WARNING
        message = "svid " + decision.result.replace("_", " ")
        log.log(level, message, extra={"fields": fields})
