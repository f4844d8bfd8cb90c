"""Bounds on what one HTTP/2 client may make its connection do, and the counter that keeps them.

Where it sits: `runtime.Config.h2` holds an `H2Limits`; `server.H2ServerConnection` keeps one
`Flood` per kind of frame a client can send for free (RST_STREAM, SETTINGS, PING, PRIORITY).
Each is cheap for a client and costs the server work, so each is counted per connection per
window and, past its bound, the connection ends with GOAWAY ENHANCE_YOUR_CALM (RFC 9113 §5.4.1,
§7: "The endpoint is ... experiencing a behavior that might be generating excessive load").
"""

from __future__ import annotations

from dataclasses import dataclass

# RFC 9113 §7 error codes used here.
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB


@dataclass(frozen=True, slots=True)
class H2Limits:
    # SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 §6.5.2): streams open at once per connection.
    max_concurrent_streams: int = 100
    # CVE-2023-44487 (rapid reset): streams the client resets per window before GOAWAY.
    max_resets: int = 200
    # SETTINGS, PING and PRIORITY frames per window before GOAWAY (CVE-2019-9512, -9515, -9516).
    max_control_frames: int = 1000
    window_seconds: float = 10.0
    # SETTINGS_INITIAL_WINDOW_SIZE the proxy advertises: request body it buffers per stream.
    initial_window: int = 256 * 1024


class Flood:
    """Events in the current window of `seconds`; `hit` says when there are too many."""

    __slots__ = ("limit", "seconds", "start", "count")

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit = limit
        self.seconds = seconds
        self.start = 0.0
        self.count = 0

    def hit(self, now: float) -> bool:
        """Count one at loop time `now`: whether the bound is passed."""
        if now - self.start > self.seconds:
            self.start, self.count = now, 0
        self.count += 1
        return self.count > self.limit
