"""TLS termination on a TLS listener: a relay's client connection upgraded in place.

Where it sits: `tls_relay.TlsRelay` has read the client's ClientHello (still held, unanswered)
and routed it to a match that terminates (issue 16, the Gateway API's TLSRouteModeTerminate:
"terminate with the listener's certificate and relay TCP"). `start` runs the server side of the
handshake on the client's transport with the context the port's store selected for the offered
name (`compiled.Streams.tls`, chosen exactly as an HTTPS port chooses: exact name, wildcards
nearest first, the default), and gives the relay the TLS transport; the relay then dials the
backend and relays plaintext both ways, its `RelaySide` now the TLS transport's protocol.

Why the shape: the ClientHello has been read from the socket already, so it is handed to the TLS
protocol before that protocol starts its handshake (`handshake.pass_on`, the HTTPS path's own
trick), which reads it as if it had just arrived. The loop's handshake timer is a backstop only:
the relay's sweep holds the handshake to `StreamLimits.hello_timeout` from the accept. No ALPN is
offered: what is relayed is not known to be HTTP. asyncio's TLS transport cannot half-close, so
a terminated relay passes no EOF on to the client: the backend's close is passed on as the TLS
close (close_notify), and the client's close_notify ends both directions.
"""

from __future__ import annotations

import asyncio
import ssl

from coxswain_proxy.dataplane import handshake
from coxswain_proxy.dataplane.stream.relay import StreamRelay

# The loop's own handshake timer, past the sweep's (which runs every second): a backstop only.
BACKSTOP_SECONDS = 5.0


async def start(relay: StreamRelay, context: ssl.SSLContext) -> asyncio.Transport | None:
    """The client's TLS transport once the handshake is done; `None` when it failed (the relay
    is left to refuse). Cancelled when the relay is closed meanwhile."""
    client = relay.client
    raw = client.transport
    if raw is None or raw.is_closing():
        return None
    held, relay.replay = relay.replay, []  # the ClientHello: the TLS protocol's, not the backend's
    client.half = False
    loop = relay.rt.loop
    # Runs after start_tls has put its protocol on the transport, before it starts.
    loop.call_soon(handshake.pass_on, raw, held)
    try:
        encrypted = await loop.start_tls(
            raw,
            client,
            context,
            server_side=True,
            ssl_handshake_timeout=relay.limits.hello_timeout + BACKSTOP_SECONDS,
        )
    except OSError:  # ssl.SSLError is one, as are a reset and the backstop's TimeoutError
        return None
    if encrypted is None or encrypted.is_closing() or relay.closed:
        if encrypted is not None:
            encrypted.abort()
        return None
    # start_tls does not call connection_made on the protocol it is given: the relay's client
    # side is told its transport here, and reads nothing more until the backend is connected.
    client.transport = encrypted
    encrypted.pause_reading()
    return encrypted
