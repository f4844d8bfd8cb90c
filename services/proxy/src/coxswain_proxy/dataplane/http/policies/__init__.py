"""A rule's policies on the request path: access lists, limits, auth, affinity, cookie splits.

Where it sits: `tables.rule_plan` compiles a rule's `coxswain_routing.Policy` with
`compiled_policy.compile_policy` into `RulePlan.policy`; `dispatch` calls `client_cert.admit`
once the rule is matched, `gate.admit` after its CORS and redirect, and `affinity` when it
picks the backend and the endpoint. One hook lives in
the request cycle itself: `guard`, which counts a chunked body against its limit as it streams.

    compiled_policy  the compiled policy (imports no heads, tables or request cycle)
    gate      the order of the compiled policy's stages
    policed   the request cycle as the policies act on it (a Protocol)
    client_cert  the client certificate a rule asks for (421, 400, 403) and its fields
    access    CIDR allow and deny lists against the client's address (403)
    request_limits  token buckets per key (429 with Retry-After), requests in flight per client
    basic     basic auth against htpasswd entries (401), with `htpasswd` the hash schemes
    extauth   the auth subrequest on the proxy's own upstream pool
    affinity  the session cookie naming an endpoint, and the canary's cookie split
    guard     a chunked body counted against the body size limit (413)
    answers   the answers the policies give themselves
"""
