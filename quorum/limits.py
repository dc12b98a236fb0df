"""Caps on what clients can make the core hold (issue 21, item 4), and the count of refusals.

Every refusal is counted in a `Refusals` (what -> count), exported by the shell as
`kraftd_refused_total{what}`. The shell's own caps (connections) count into its metrics.
"""
from __future__ import annotations

from collections import Counter

from ..protocol.errors import ErrorCode

# `what` labels of kraftd_refused_total.
AUTO_CREATE_RATE = "auto_create_rate"
AUTO_CREATE_TOTAL = "auto_create_total"
PARTITIONS = "partitions"
FETCH_SESSION_PARTITIONS = "fetch_session_partitions"
GROUPS = "groups"
GROUP_MEMBERS = "group_members"
REQUEST_TIMEOUT = "request_timeout"


class Refusals(Counter):
    """what -> how many times it was refused."""

    def refuse(self, what: str) -> None:
        self[what] += 1


class AutoCreateLimiter:
    """Auto-creation of topics (Metadata, Produce): a token bucket of `burst` tokens refilled at
    `rate` per second, and a total number of topics past which nothing is auto-created."""

    def __init__(self, rate_per_s: float, burst: int, max_topics: int, refusals: Refusals) -> None:
        self.rate_per_ms = rate_per_s / 1000.0
        self.burst = float(burst)
        self.max_topics = max_topics
        self.tokens = float(burst)
        self.refusals = refusals
        self._last_ms: int | None = None

    def admit(self, now_ms: int, topics: int, partitions=None, max_partitions: int | None = None,
              adding: int = 1) -> ErrorCode:
        """NONE and one token taken, or UNKNOWN_TOPIC_OR_PARTITION (what a broker with
        auto-creation off answers; every client retries it) counted as refused.
        `partitions()`: how many the cluster holds (asked only when `max_partitions` is set)."""
        if topics >= self.max_topics:
            self.refusals.refuse(AUTO_CREATE_TOTAL)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self._last_ms is not None and now_ms > self._last_ms:
            self.tokens = min(self.burst, self.tokens + (now_ms - self._last_ms) * self.rate_per_ms)
        if self._last_ms is None or now_ms > self._last_ms:
            self._last_ms = now_ms
        if self.tokens < 1.0:
            self.refusals.refuse(AUTO_CREATE_RATE)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if max_partitions is not None and partitions() + adding > max_partitions:
            self.refusals.refuse(PARTITIONS)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self.tokens -= 1.0
        return ErrorCode.NONE


def partitions_over(existing: int, adding: int, cap: int) -> str | None:
    """The POLICY_VIOLATION message when a CreateTopics would take the cluster past `cap`."""
    if existing + adding <= cap:
        return None
    return (f"The cluster holds {existing} partitions; {adding} more would exceed max_partitions "
            f"({cap}).")


def capped_timeout(timeout_ms: int, cap_ms: int, refusals: Refusals) -> int:
    """A client's timeout for a parked request, at most `cap_ms` (request_timeout_cap_ms)."""
    if timeout_ms > cap_ms:
        refusals.refuse(REQUEST_TIMEOUT)
        return cap_ms
    return timeout_ms
