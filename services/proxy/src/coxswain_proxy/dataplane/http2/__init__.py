"""The client side of HTTP/2: one server connection per client, each stream one request cycle.

Where it sits: `negotiate` picks HTTP/2 for a connection (ALPN `h2` after a TLS handshake, the
prior-knowledge preface on a cleartext port) and hands it to `server.H2ServerConnection`,
which drives the `h2` library's state machine. Each stream's request is checked (`validate`,
RFC 9113 §8.2-8.3) and becomes a `http.request_cycle.RequestCycle` whose client is the stream
(`h2stream.H2Stream`, a `contracts.Downstream`): routing, filters, retries, timeouts, mirrors and
metrics are the HTTP/1.1 path's own. `limits` holds the bounds on what a client may make the
connection do (rapid reset, control-frame floods, header sizes, stalled windows).
"""
