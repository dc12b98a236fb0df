"""The server's two clocks (quorum/wall_clock.py says which the core uses for what).

`now_ms` drives every timer in the core. It is the monotonic clock, anchored at the wall time
when this process started: it never steps when the system clock does (an NTP correction, an
operator's `date -s`), and its values stay close to wall times, so what the core keeps across a
restart (producer states' last-seen times, group state times) still compares sensibly.
`wall_ms` is the system clock, for timestamps only."""
from __future__ import annotations

import time

_MONOTONIC_ANCHOR_NS = time.monotonic_ns()
_WALL_ANCHOR_NS = time.time_ns()


def now_ms() -> int:
    """Monotonic milliseconds (never steps), near the wall time at start: for timers."""
    return (_WALL_ANCHOR_NS + time.monotonic_ns() - _MONOTONIC_ANCHOR_NS) // 1_000_000


def wall_ms() -> int:
    """Milliseconds since the Unix epoch by the system clock: for timestamps."""
    return time.time_ns() // 1_000_000
