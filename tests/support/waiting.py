"""Bounded waits for tests that watch a real server: every wait ends, with a message."""
from __future__ import annotations

import time


class WaitTimeout(AssertionError):
    """A bounded wait ran out (the server did not deliver what it should have)."""


def poll_until(predicate, timeout: float, interval: float = 0.05):
    """The predicate's first truthy value, or its last (falsy) value once `timeout` passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def wait_until(predicate, timeout: float, what: str = "condition", interval: float = 0.05):
    """Like poll_until, but running out raises WaitTimeout naming what was awaited."""
    value = poll_until(predicate, timeout, interval)
    if not value:
        raise WaitTimeout(f"timed out after {timeout}s waiting for {what}")
    return value
