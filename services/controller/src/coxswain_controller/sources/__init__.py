"""The controller's sources: Kubernetes watches feeding one object cache (issue 6, item 1).

`supervisor.Sources` probes the Gateway API, runs one `reflector.Reflector` per kind, one per
Secret that basic auth or an Ingress's TLS annotations name (`secrets`, `references`), and one
consumer that applies their events to a `cache.Cache`; translation reads `Cache.snapshot()`.
"""
