"""The status writer: puts translation's verdicts onto the live objects, leader only.

`merge` decides the new status (keeping what is not ours), `gate` holds a Gateway's Programmed
until the data plane has bound and acked it, `writer` talks to the API server.
"""
