"""The upstream side of the request path: connections to backends, their pool, their TLS."""
