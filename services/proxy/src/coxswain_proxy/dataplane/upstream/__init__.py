"""The backend side of the request path: connections to endpoints, pooled and reused.

- `shell`: what every upstream connection does alike (`contracts.Upstream`): its gate, its
  close, back-pressure.
- `connection`: HTTP/1.1 to a backend: the request written, the response parsed.
- `h2c`: cleartext HTTP/2 by prior knowledge, for `appProtocol: kubernetes.io/h2c` ports.
- `connector`: the pool's I/O (`PooledConnector`): opening, handing out, taking back.
- `pool`: the pool's bookkeeping, pure: per-origin idle FIFO, limits, waiters, expiry.
- `picker`: round robin over an endpoint set's ready endpoints, and what an `Origin` is.
- `backend_tls`: TLS to backends a BackendTLSPolicy governs.
- `mirror`: fire-and-forget RequestMirror copies.
"""
