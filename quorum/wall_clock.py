"""Two clocks. Every `now_ms` the shell hands the core drives timers: deadlines, timeouts,
intervals, lag windows. The server reads it from the monotonic clock, so a stepped or slewed
system clock moves no deadline (no election, no expired session, no lost ISR member because NTP
corrected the time). The wall clock only stamps what is written down or compared with record
timestamps: LogAppendTime, the timestamps of LeaderChange, metadata and group batches, offset
commit and group state timestamps, retention by time, and the times DescribeQuorum reports.

The core reads no clock itself: the shell injects `read` (ms since the Unix epoch). Without one
(unit tests, tools that drive the core with wall times) wall time is `now_ms` itself."""
from __future__ import annotations

from typing import Callable


class WallClock:
    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], int] | None = None) -> None:
        self._read = read

    def at(self, now_ms: int) -> int:
        """Wall time (ms since the epoch) at the core's `now_ms`."""
        return now_ms if self._read is None else self._read()

    def of(self, then_ms: int, now_ms: int) -> int:
        """Wall time of an earlier core time `then_ms` (negative stays negative: "never")."""
        if then_ms < 0 or self._read is None:
            return then_ms
        return self._read() - (now_ms - then_ms)

    def to_core(self, wall_ms: int, now_ms: int) -> int:
        """A wall time read back (a record's timestamp) as a core time, for timers."""
        if wall_ms < 0 or self._read is None:
            return wall_ms
        return now_ms - (self._read() - wall_ms)
