"""The proxy's HTTP/HTTPS data plane (issue 7): listeners, the HTTP/1.1 path, upstream pools.

`dataplane.Dataplane(config).apply(resources)` is the one entry point: it compiles a snapshot's
resources into `tables.Tables`, swaps them in, binds and unbinds listeners, and returns the
ports bound. `workers` runs the same thing in several processes sharing the listening ports.
"""
