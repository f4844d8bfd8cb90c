"""Stream relays: TCP, TLS passthrough and UDP, for TCPRoute, TLSRoute and UDPRoute.

- `compiled`: a snapshot's `StreamRoute`s compiled into per-port tables (route by server name,
  the weighted backendRef, then an endpoint in turn), called from `dataplane.tables`;
- `relay`: the TCP relay pair (client and backend protocols), half-close, backpressure both ways,
  connect and idle timeouts;
- `clienthello`: the sans-IO ClientHello reader (the server name, never terminating TLS);
- `passthrough`: a TLS connection until its ClientHello is read and routed, then a relay;
- `udp`: per-client sessions, committed to one backend each;
- `binds`: the stream ports bound (TCP, TLS, UDP), beside the HTTP ones of `dataplane.listeners`;
- `counters`: per-route connection and byte counters.
"""
