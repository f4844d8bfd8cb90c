"""The HTTPRoute stage: attach each route, compile its rules, serve it where it was accepted.

`httproutes` runs the stage: `attach` decides which listeners accept a route (the hostname
intersection is `coxswain_routing.intersect_hostnames`, the rule the proxy uses too), and
`rules` compiles its rules with `filters`, whose values `wire_values` checks first; `memo`
reuses compiled routes between passes.
"""
