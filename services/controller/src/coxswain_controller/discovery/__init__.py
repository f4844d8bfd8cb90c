"""The discovery server: serves compiled snapshots to proxies over mandatory-mTLS gRPC.

`registry` holds what is published per scope, `session` decides what one stream sends next,
`scopes` decides who may subscribe to what, `nodes` tracks each connected proxy, `server`
wires them to grpc.aio. See docs/discovery.md for the protocol.
"""
