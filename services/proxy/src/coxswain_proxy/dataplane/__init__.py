"""The proxy's second flow: from a committed snapshot to the bytes each request gets.

`core.Dataplane(options)` is the one entry point: `apply(resources)` compiles a snapshot's
resources into `tables.Tables` (off the loop, reusing what an unchanged resource compiled to),
swaps them into the worker's `runtime.Runtime` in one assignment, brings the listeners in line
(`listeners`) and returns the ports bound. `workers` runs the same in several forked processes
sharing the listening ports; `wiring` is what `cli.serve` calls to start either.

Here, at the root, compilation and process structure: `tables` and `framing` (a snapshot
compiled for the request path, and the check that nothing compiled can split a head), `core`,
`runtime`, `wiring`, `workers`, `listeners`, `tls` and `handshake` (serving TLS), `stats` and
`collector` (counters and their Prometheus families), `errors` (what each failure answers), and
`contracts`, the Protocols the request path is written against. The request path itself:

- `http/`: the client side: the HTTP/1.1 connection, each request's cycle and what it is
  dispatched to, heads, the proxy's own answers, flow control, the outbox;
- `upstream/`: the backend side: connections (HTTP/1.1 and h2c), the pool, the endpoint
  picker, upstream TLS, mirrors.

`testing` and `http/recording` are for tests only.
"""
