"""A rule's retry policy: which failed attempts are tried again, and with what request body.

Where it sits: `request_cycle.RequestCycle` makes the attempts and asks here, when one has
failed, whether another may follow (`may_retry`), and builds that attempt's body from what was
kept of the request's (`replayed`). What fails an attempt, and what the request is answered
when no attempt is left, is the cycle's and the errors' (`errors.DataplaneError.status`): the
table is in docs/routing.md, "Retries and timeouts".

The policy, after spec 003 "Timeouts and retry" and the Gateway API's `HTTPRouteRetry`:
- what fails an attempt: a connection that could not be opened, one lost before the response
  ended (closed, reset, an HTTP/2 stream reset, a GOAWAY the request was not processed under),
  a response head that breaks the protocol, `timeouts.backendRequest` running out before the
  response ended, and a response whose status is in `retry.codes`. The Gateway API: "Implementations
  SHOULD retry on connection errors (disconnect, reset, timeout, TCP failure) if a retry
  stanza is configured", and for BackendRequest "any retry attempts which reach the
  configured BackendRequest timeout duration without a response SHOULD be canceled".
- `retry.attempts` is the number of attempts after the first (the conformance case with
  `attempts: 2` succeeds on the third request), so an attempt may follow while
  `attempts <= retry.attempts`;
- only an idempotent method is repeated (RFC 9110 §9.2.2), and only when its whole body so far
  was kept to be sent again (up to `Config.replay_limit`; beyond, nothing is kept and the
  request is not retried);
- once any of the response has gone to the client, nothing is retried.

Why functions over plain values: the cycle's slots hold the state; the rules are here, small
and testable on their own, and cost the request path one call per failed attempt only.
"""

from __future__ import annotations

from coxswain_proxy.dataplane.http import responses
from coxswain_proxy.dataplane.tables import RulePlan

# RFC 9110 §9.2.2: methods whose repetition has the same effect: the only ones retried.
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})


def may_retry(plan: RulePlan, method: bytes, attempts: int, replay: list[bytes] | None) -> bool:
    """Another attempt may follow the `attempts` made so far, which all failed.

    Spec 003 "Timeouts and retry": "retry repeats an idempotent request after a connection
    failure and after a response whose status is in codes, attempts times". A body that was not
    kept whole (`replay` None: none was kept, or it outgrew the bound) cannot be sent again.
    """
    return attempts <= plan.retries and method in IDEMPOTENT and replay is not None


def frame(chunk: bytes, chunked: bool) -> bytes:
    """A piece of the request body as it goes upstream: a chunk of its own when chunked."""
    if chunked:
        return b"%x\r\n%b\r\n" % (len(chunk), chunk)
    return chunk


def replayed(
    replay: list[bytes], *, chunked: bool, complete: bool, last: bytes = responses.LAST_CHUNK
) -> list[bytes]:
    """The body of a new attempt: every piece kept so far, framed, and, when the request was
    read whole, its last chunk `last` with the client's trailer fields in it (pieces still to
    come, and the trailers of a request not yet read whole, are sent on as they arrive)."""
    body = [frame(c, chunked) for c in replay]
    if complete and chunked:
        body.append(last)
    return body


__all__ = ["IDEMPOTENT", "frame", "may_retry", "replayed"]
