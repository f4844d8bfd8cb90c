"""The proxy's first flow: from the controller's discovery stream to a committed routing state.

The discovery client (`client`) obtains an SVID (`svid`), dials the controller's endpoints in
turn (`endpoints`), runs one stream at a time (`stream`), and decides what follows each stream's
end (`lifecycle`, `backoff`). Each pushed snapshot is staged into a new `RoutingState`
(`snapshot`) and committed through the `RoutingHolder` (`holder`), whose appliers (the data
plane's relay, `dataplane.wiring`) swap it in and bind its ports before the Ack; the ports then
bound go back to the controller as NodeStatus (`ports`). `failures` is this flow's exception
tree, `metrics` its Prometheus metrics, `clock` the time it waits on (fast-forwarded in tests).

Nothing here runs per request: the request path reads only the data plane's compiled tables.
"""
