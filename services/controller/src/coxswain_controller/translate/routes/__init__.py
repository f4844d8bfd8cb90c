"""The HTTPRoute stage: attach each route, compile its rules, serve it where it was accepted.

`httproutes` runs the stage: `attach` (and `hostnames`) decide which listeners accept a route,
`rules` compiles its rules with `filters`, whose values `wire_values` checks first; `memo`
reuses compiled routes between passes.
"""
