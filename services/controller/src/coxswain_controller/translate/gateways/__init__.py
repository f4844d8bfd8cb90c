"""The Gateway stages: which GatewayClasses and Gateways are ours, and what each listener serves.

In pipeline order: `classes` (claimed GatewayClasses), `gateway_states` (Gateways and their
listeners validated, with `certificates` loading their TLS Secrets), `bind_ports` (where the
proxy listens for each listener), `finalize` (listeners and TLS stores into the tables),
`addresses` (the published Service's addresses) and `gateway_status` (Gateway and listener
verdicts and Events).
"""
