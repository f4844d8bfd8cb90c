"""Stream relays: TCP, TLS (passed through or terminated) and UDP, for TCPRoute, TLSRoute and
UDPRoute.

- `compiled`: a snapshot's `StreamRoute`s compiled into per-port tables (route by server name,
  the weighted backendRef, then an endpoint in turn; terminating TLS ports' certificates), called
  from `dataplane.tables`;
- `relay`: the TCP relay pair (client and backend protocols), half-close, backpressure both ways,
  connect and idle timeouts;
- `relay_limits`: the relays' bounds and the `serve` flags that set them;
- `clienthello`: the sans-IO ClientHello reader (the server name, never terminating TLS);
- `tls_relay`: a TLS connection until its ClientHello is read and routed, then a relay, passed
  through or terminated;
- `terminate`: the client's TLS ended with the listener's certificate, in place, each direction
  closing on its own (half-close, as on TCP);
- `udp`: per-client sessions, committed to one backend each;
- `binds`: the stream ports bound (TCP, TLS, UDP), beside the HTTP ones of `dataplane.listeners`.
"""
