"""The request cycle as the policies act on it, a `Protocol`: they never import its class.

Where it sits: `http.request_cycle.RequestCycle` (and its subclass for HTTP/2 streams)
satisfies `PolicedCycle`; `gate`, `extauth`, `answers` and `accesslog` are written against it,
and `guard.Guarded` adds the one attribute the guard keeps on it. The request cycle imports
`guard`, so a policy importing the cycle's class would make a cycle of imports (the way
`contracts` keeps the cycle and the connections apart). The modules `tables` compiles a policy
with (`compiled_policy` and what it imports) name even less of it, by Protocols of their own,
since this one names the runtime, whose module imports `tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.contracts import Downstream
    from coxswain_proxy.dataplane.runtime import Runtime
    from coxswain_proxy.dataplane.upstream.picker import Origin

__all__ = ["PolicedCycle"]


class PolicedCycle(Protocol):
    """One request, as a policy refuses, holds, logs or passes it."""

    headers: list[tuple[bytes, bytes]]  # the request's fields (external auth replaces some)

    @property
    def conn(self) -> Downstream:
        """The client connection it arrived on."""

    @property
    def rt(self) -> Runtime:
        """The worker's runtime: its loop, its upstream pool."""

    @property
    def method(self) -> bytes: ...

    @property
    def url(self) -> bytes: ...

    @property
    def host(self) -> bytes | None:
        """Its Host field; None: none."""

    @property
    def version(self) -> str: ...

    @property
    def phase(self) -> int:
        """Where it is in its life (`http.phases`)."""

    @property
    def route(self) -> str: ...

    @property
    def status(self) -> int:
        """The status answered; 0: none yet."""

    @property
    def origin(self) -> Origin | None:
        """The endpoint of its last attempt; None: none."""

    @property
    def cors(self) -> list[tuple[bytes, bytes]]:
        """Fields every answer to it carries (the rule's CORS filter, an affinity cookie)."""

    def must_close(self) -> bool:
        """The client connection closes after the answer."""

    def answer(self, status: int, data: bytes) -> None:
        """Answer it here with `data`, a whole response."""
