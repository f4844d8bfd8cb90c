"""The Gateway API's precedence among matches that meet on one host tier: one module, one order.

Spec 003 "Matches and precedence": requests are resolved "by path, exact before longest prefix
before regular expression, then by method, and finally by the match's header and query
parameter conditions, most specific first ... a match naming a method first, then more header
matches, then more query parameter matches, then the older route" and "ties on creation time
break on namespace then name".

Path specificity is not part of the key below: the matcher buckets candidates by path kind and
probes exact, then each prefix longest first, then regular expressions, so only candidates that
meet on one path are ever ordered by this key.
"""

from __future__ import annotations

from coxswain_routing._model import Match, RouteId

__all__ = ["precedence_key", "PrecedenceKey"]

PrecedenceKey = tuple[int, int, int, int, str, str, int, int]


def precedence_key(route: RouteId, match: Match, match_index: int) -> PrecedenceKey:
    """Sorts ascending into precedence order: the first candidate that matches wins."""
    return (
        0 if match.method else 1,  # a match naming a method first
        -len(match.headers),  # then more header matches
        -len(match.query),  # then more query parameter matches
        route.creation_seconds,  # then the older route
        route.namespace,  # ties on creation time break on namespace
        route.name,  # then name
        route.rule_index,  # within one route, the earlier rule
        match_index,  # and the earlier match
    )
