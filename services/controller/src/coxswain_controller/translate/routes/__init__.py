"""The HTTPRoute stage: attach each route, compile its rules, serve it where it was accepted.

`httproutes` runs the stage: `attach` decides which listeners accept a route (the hostname
intersection is `coxswain_routing.intersect_hostnames`, the rule the proxy uses too), and
`rules` compiles its rules with `filters`, whose values `wire_values` checks first; `memo`
reuses compiled routes between passes. `streamroutes` is the stage for TCPRoute, TLSRoute and
UDPRoute: the same `attach`, one rule compiled by `streamrules`, and `streamclaims` deciding which
route keeps a listener or a server name.
"""
