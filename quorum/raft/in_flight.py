"""Requests sent to peers and not answered yet: correlation ids, timeouts, and matching an
answer to its request."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .rpc import Send


@dataclass(slots=True)
class InFlight:
    destination: int
    api_key: int
    sent_ms: int
    context: object        # what the answer is for (a FetchStream, the asks of a batch, a Call...)
    timeout_ms: int = -1   # -1: the configured request timeout


@dataclass(slots=True)
class Call:
    on_done: object  # (response | None, now_ms) -> None


class InFlightRequests:
    def __init__(self, first_correlation: int, request_timeout_ms: int) -> None:
        # A random start (from the caller): answers meant for a previous incarnation of this
        # node never match.
        self._next_correlation = first_correlation
        self._request_timeout_ms = request_timeout_ms
        self._by_correlation: dict[int, InFlight] = {}

    def __bool__(self) -> bool:
        return bool(self._by_correlation)

    def start(self, destination: int, api_key: int, version: int, request, now_ms: int, context=None,
              timeout_ms: int = -1) -> Send:
        correlation = self._next_correlation
        self._next_correlation += 1
        self._by_correlation[correlation] = InFlight(destination, api_key, now_ms, context, timeout_ms)
        return Send(destination, api_key, version, request, correlation)

    def answered(self, source: int, correlation_id: int, response) -> InFlight | None:
        """The request `response` answers, no longer in flight; None for a late answer (already
        timed out), a duplicate, or one that does not answer that request."""
        flight = self._by_correlation.get(correlation_id)
        if flight is None or flight.destination != source or not _answers(flight.api_key, response):
            return None
        del self._by_correlation[correlation_id]
        return flight

    def fail_expired(self, now_ms: int, failed: Callable[[InFlight, int], None]) -> None:
        expired = [c for c, f in self._by_correlation.items() if now_ms - f.sent_ms >= self._timeout(f)]
        for correlation in expired:
            failed(self._by_correlation.pop(correlation), now_ms)

    def fail_to(self, node_id: int, now_ms: int, failed: Callable[[InFlight, int], None]) -> None:
        """`node_id` cannot be reached: every request to it fails now."""
        for correlation in [c for c, f in self._by_correlation.items() if f.destination == node_id]:
            failed(self._by_correlation.pop(correlation), now_ms)

    def next_expiry_ms(self) -> int | None:
        if not self._by_correlation:
            return None
        return min(f.sent_ms + self._timeout(f) for f in self._by_correlation.values())

    def _timeout(self, flight: InFlight) -> int:
        return flight.timeout_ms if flight.timeout_ms >= 0 else self._request_timeout_ms


def _answers(api_key: int, response) -> bool:
    return getattr(type(response), "API_KEY", api_key) == api_key
