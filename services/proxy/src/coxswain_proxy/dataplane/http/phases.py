"""One request cycle's phases and the moves between them: the table `request_cycle` follows.

Where it sits: `request_cycle.RequestCycle.phase` holds one of these. The callbacks that move a
request along (its turn, a connection, a response head, a failure, its end) each set the phase
they lead to, and read it to tell what a late callback means: a connection handed over after
the request was answered goes back to the pool, a body after the answer is dropped, a second
end is no end. The request's own side (its body still arriving, or read whole) is apart from
this: `request_done`, since a body may still arrive in any phase before `DONE`.

Why a table (conventions: a lifecycle with more than three states is a transition table): the
ten phases replace five booleans whose combinations were the design (`finished`, `response_started`,
`response_done`, and `discarding` meaning two things), and the legal moves can be read here at a
glance.

Why plain ints, and no check at each move: the request path is hot, and a checked move costs a
lookup and a branch every time (about 0.1 µs, four or more per request). The phases are numbered
in the order a request moves through them, so `phase >= RESPONDING` reads "the answer has
begun" and `phase >= DONE` "nothing more to do"; `phases_test` drives real requests of every
kind through a cycle that records its moves and holds each one to this table.
"""

from __future__ import annotations

WAITING = 0  # parsed; waits its turn behind the requests pipelined before it
CONNECTING = 1  # an attempt asked the pool for a connection; none handed over yet
BACKOFF = 2  # between two attempts: the retry's backoff is running
SENT = 3  # bound to an upstream connection, the request going out, no response head yet
DISCARDING = 4  # the upstream answered a status to retry on: its response is read and dropped
RESPONDING = 5  # the upstream's response head is out to the client; its body follows
ANSWERED = 6  # the whole answer is out (the upstream's or the proxy's own)
DONE = 7  # the client connection was told: the next request's turn (final)
TUNNEL = 8  # after a 101 the connections pass bytes both ways, untouched (final)
CLOSED = 9  # ended without a whole answer: the client left, or the response broke off (final)

NAMES = (
    "waiting", "connecting", "backoff", "sent", "discarding", "responding", "answered", "done",
    "tunnel", "closed",
)  # fmt: skip

# Every phase may go to CLOSED (the client leaves) until it is final; the rest is the design.
TRANSITIONS: dict[int, frozenset[int]] = {
    # Its turn: routed and sent on, or answered here (404, redirect, CORS preflight, 400 ...).
    WAITING: frozenset({CONNECTING, ANSWERED, CLOSED}),
    # The pool hands a connection over, or the connect fails or the attempt's time
    # (backendRequest) runs out: retried at once, after a backoff, or answered 503 or 504; the
    # request's time runs out: 504.
    CONNECTING: frozenset({SENT, CONNECTING, BACKOFF, ANSWERED, CLOSED}),
    # The backoff ends: the next attempt, or 503 when no origin is left; or 504.
    BACKOFF: frozenset({CONNECTING, ANSWERED, CLOSED}),
    # The head comes (passed on, or a retry code to discard); the connection is lost before it,
    # the head is broken, or the attempt's time runs out: retried, or 503, 502 or 504; or 504.
    SENT: frozenset({RESPONDING, DISCARDING, CONNECTING, BACKOFF, ANSWERED, CLOSED}),
    # The discarded response ends, or breaks, or the attempt's time runs out: the retry; or 504.
    DISCARDING: frozenset({CONNECTING, BACKOFF, ANSWERED, CLOSED}),
    # The body ends; a 101 becomes a tunnel; a break or a timeout (the attempt's, which bounds
    # the whole response, or the request's) closes the client connection.
    RESPONDING: frozenset({ANSWERED, TUNNEL, CLOSED}),
    # Once the request has been read whole (at once, when it was already).
    ANSWERED: frozenset({DONE, CLOSED}),
    DONE: frozenset(),
    TUNNEL: frozenset(),
    CLOSED: frozenset(),
}
