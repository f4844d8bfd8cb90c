"""The client side of the request path: what a client's bytes become, and what it gets back.

- `http11`: the client connection (`asyncio.Protocol`): parsing with httptools, pipelining,
  limits and slow-client bounds, keep-alive, Upgrade tunnels.
- `request_cycle`: one request's `RequestCycle`: its upstream attempts, retries, timeouts, the
  response, the end; `phases` is the table of its phases and the moves between them.
- `dispatch`: what becomes of a request when its turn comes: routing (with its memo), 421,
  CORS, redirect, header plans, rewrite, the weighted pick, mirrors; the head sent upstream.
- `heads`: request and response heads as bytes (hop-by-hop, Via, X-Forwarded-*);
  `corsfields`: a CORS rule's fields on a forwarded response, in place of the upstream's.
- `responses`: precomputed status lines and the proxy's own answers.
- `targets` and `headchecks`: the request-target, Host, framing and persistence checks llhttp
  leaves to the proxy.
- `flow`: reading paused on either side while any reason holds.
- `outbox`: every write held until the loop's batch of events is handled, then made back to
  back.
- `recording` (tests only): a strict backend that records what the proxy forwards.
"""
