"""`explain()`: the same outcome as `match()`, plus why every other candidate lost.

Operators ask "why did my request go there" more than anything. For one request this lists
every candidate served on that port for a host pattern covering the request's host, in the
order the matcher considers them, each with its verdict: the winner, a predicate it failed
(path, method, a named header or query parameter), a host tier that was never reached, or the
precedence rule that put an equally matching candidate behind the winner. On a Gateway's port
it also names the listener that claimed the request (listener isolation, `Claims`), and a
candidate served for a host another listener claims says so.

Not on the request path: it re-runs the predicates candidate by candidate and allocates freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coxswain_routing._candidates import Candidate
from coxswain_routing._hosts import normalize_host
from coxswain_routing._matcher import Claims, Outcome, Router, parse_query
from coxswain_routing._model import PathType, RouteId
from coxswain_routing._paths import normalize_path, prefix_covers

__all__ = ["Explanation", "Verdict", "explain"]


@dataclass(frozen=True, slots=True)
class Verdict:
    route: RouteId
    match_index: int
    host: str  # the host pattern the candidate is served for ("" for every host)
    verdict: str  # "selected", or why it lost


@dataclass(frozen=True, slots=True)
class Explanation:
    outcome: Outcome
    path: str  # the normalised path that was matched
    candidates: tuple[Verdict, ...]
    # The listener that claimed the request, by its name, and its hostname ("" for none): ""
    # and None on a port without listeners (Ingress), or when no listener covers the host.
    listener: str = ""
    listener_hostname: str | None = None


def _path_matches(cand: Candidate, path: str) -> bool:
    kind = cand.match.path.type
    if kind is PathType.EXACT:
        return cand.path == path
    if cand.path_pattern is not None:
        return cand.path_pattern.fullmatch(path) is not None
    return prefix_covers(cand.path, path)


def _failure(
    cand: Candidate, path: str, method: str, headers: Mapping[str, str], query: str
) -> str | None:
    if not _path_matches(cand, path):
        return (
            f"path: {cand.match.path.type.value} {cand.match.path.value!r} does not match {path!r}"
        )
    if cand.method and cand.method != method:
        return f"method: matches {cand.method}, the request is {method}"
    header = cand.failing_header(headers)
    if header is not None:
        state = "absent" if header not in headers else f"{headers[header]!r} does not match"
        return f"header {header}: {state}"
    params = parse_query(query)
    param = cand.failing_query(params)
    if param is not None:
        state = "absent" if param not in params else f"{params[param]!r} does not match"
        return f"query {param}: {state}"
    return None


def _path_rank(cand: Candidate) -> tuple[int, int]:
    kind = cand.match.path.type
    if kind is PathType.EXACT:
        return (0, 0)
    if kind is PathType.REGULAR_EXPRESSION:
        return (2, 0)
    return (1, -len(cand.path))


def _why_behind(loser: Candidate, winner: Candidate) -> str:
    """The first precedence rule that ranks `winner` ahead of an equally matching `loser`."""
    if winner.routes.host != loser.routes.host:
        return f"host: the more specific host {winner.routes.host or '(any)'!r} answered first"
    lp, wp = _path_rank(loser), _path_rank(winner)
    if wp != lp:
        kinds = {0: "an Exact path", 1: "a longer PathPrefix", 2: "a RegularExpression"}
        return f"precedence: the winner has {kinds[wp[0]] if wp[0] != lp[0] else kinds[1]}"
    reasons = (
        "the winner names a method",
        "the winner has more header matches",
        "the winner has more query parameter matches",
        "age: the winner's route is older",
        "tie-break: the winner's namespace sorts first",
        "tie-break: the winner's name sorts first",
        "the winner is an earlier rule of the same route",
        "the winner is an earlier match of the same rule",
    )
    for reason, w, lo in zip(reasons, winner.order, loser.order, strict=True):
        if w != lo:
            return f"precedence: {reason}"
    return "precedence: an equal candidate was ordered first"


def explain(
    router: Router,
    port: int,
    host: str,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
    query: str = "",
) -> Explanation:
    """What `router.match` answers for this request, and a verdict for every candidate."""
    headers = headers or {}
    outcome = router.match(port, host, method, path, headers, query)
    winner = outcome if isinstance(outcome, Candidate) else None
    normalized = normalize_path(path)
    table = router.port_table(port)
    host = normalize_host(host)
    tiers = list(table.tiers(host)) if table is not None else []
    claims = table.claims if table is not None else None
    claimed = claims.claim(host) if claims is not None else None
    verdicts = []
    reached = True
    for tier in tiers:
        owner = claims.claim(tier.pattern) if claims is not None else None
        for cand in tier.all_candidates():
            if claims is not None and owner != claimed:
                verdict = _isolated(claims, claimed, owner)
            else:
                verdict = _verdict(cand, winner, reached, normalized, method, headers, query)
            verdicts.append(Verdict(cand.rule.id, cand.match_index, tier.pattern, verdict))
        # The tier that answered (a winner, or the method fill's 404) ends the walk.
        if reached and tier.lookup(normalized, method, headers, query) is not None:
            reached = False
    listener = claims.names[claimed] if claims is not None and claimed is not None else ""
    return Explanation(outcome, normalized, tuple(verdicts), listener, claimed)


def _isolated(claims: Claims, claimed: str | None, owner: str | None) -> str:
    """Why a candidate of another listener's host was never considered."""
    if claimed is None:
        return "isolation: no listener on this port claims the request's host"
    mine = f"listener {claims.names[claimed]!r} ({claimed or 'any host'})"
    theirs = f"listener {claims.names[owner]!r}" if owner is not None else "no listener"
    return f"isolation: {mine} claims the request; this host belongs to {theirs}"


def _verdict(
    cand: Candidate,
    winner: Candidate | None,
    reached: bool,
    path: str,
    method: str,
    headers: Mapping[str, str],
    query: str,
) -> str:
    if cand is winner:
        return "selected"
    failure = _failure(cand, path, method, headers, query)
    if failure is not None:
        return failure
    if not reached:
        return "host: a more specific host tier decided the request first"
    if winner is None:
        return "not reached"
    return _why_behind(cand, winner)
