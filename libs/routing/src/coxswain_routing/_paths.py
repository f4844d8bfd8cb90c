"""Request path normalisation and the segment-aware prefix rule.

Where it sits: the matcher normalises every request path once, before any lookup, so a path
can never reach a route by being spelled differently from how the route was written, nor slip
past one. The rules (RFC 3986 section 6.2.2, narrowed):

- percent-encodings of unreserved characters (ALPHA, DIGIT, "-", ".", "_", "~") are decoded,
  and every other percent-encoding is kept with upper-case hex digits;
- `%2F` is never decoded: an encoded slash is data inside a segment, not a separator;
- dot segments are removed after that decoding, so `/%2E%2E/admin` is `/admin`;
- an empty path is `/`; repeated slashes are kept (they are distinct paths to most backends).

The fast path (no `%`, no dot segment) returns the input unchanged, without allocating.
"""

from __future__ import annotations

import re

__all__ = ["normalize_path", "prefix_covers", "strip_trailing_slash", "path_prefixes"]

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def _decode_unreserved(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 section 5.2.4, over whole segments.
    output: list[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments[1:], start=1):
        last = i == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    return "/" + "/".join(output)


def _has_dot_segment(path: str) -> bool:
    return "/." in path and any(s in (".", "..") for s in path.split("/"))


def normalize_path(path: str) -> str:
    """The path the matcher compares: see the module docstring for the rules."""
    if not path:
        return "/"
    if "%" in path:
        path = _PERCENT.sub(_decode_unreserved, path)
    if _has_dot_segment(path):
        path = _remove_dot_segments(path)
    if not path.startswith("/"):
        path = "/" + path
    return path


def strip_trailing_slash(prefix: str) -> str:
    """A PathPrefix without its trailing slash, which means nothing ("/" stays "/")."""
    stripped = prefix.rstrip("/")
    return stripped or "/"


def prefix_covers(prefix: str, path: str) -> bool:
    """Whether PathPrefix `prefix` (without trailing slash) matches `path` on whole segments.

    Spec 003 "Matches and precedence": "/foo matches /foo and /foo/bar but never /foobar".
    """
    if prefix == "/":
        return True
    return path == prefix or (path.startswith(prefix) and path[len(prefix)] == "/")


def path_prefixes(path: str) -> list[str]:
    """Every segment prefix of `path`, longest first, ending with "/".

    `/a/b/` gives `/a/b`, `/a`, `/`: the keys a PathPrefix table is probed with, so prefix
    lookup costs the path's depth, not the number of routes.
    """
    prefixes = []
    end = len(path.rstrip("/"))
    while end > 0:
        prefixes.append(path[:end])
        end = path.rfind("/", 0, end)
    prefixes.append("/")
    return prefixes
