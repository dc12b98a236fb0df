"""How long the event loop stalls: a heartbeat timer every 10 ms, and how late it fires.

A callback that blocks the loop for 30 ms makes the next heartbeat fire about 30 ms late, so
the lateness measures the stall (to the heartbeat's period, and uvloop's 1 ms timer grain).
Exposed as `kraftd_event_loop_lag_ms` (a histogram of every heartbeat's lateness) and
`kraftd_event_loop_lag_worst_ms` (the worst since the server started).
"""
from __future__ import annotations

import asyncio
from typing import Iterable

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .loop_metrics import LoopHistogram

HEARTBEAT_S = 0.010
LAG_MS_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0)


class LoopLagMonitor(Collector):
    def __init__(self, interval_s: float = HEARTBEAT_S) -> None:
        self.interval_s = interval_s
        self.histogram = LoopHistogram(LAG_MS_BUCKETS)
        self.worst_ms = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._arm(self._loop.time())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, now: float) -> None:
        self._due = now + self.interval_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        now = self._loop.time()
        lag_ms = max(0.0, (now - self._due) * 1000.0)
        self.histogram.observe(lag_ms)
        if lag_ms > self.worst_ms:
            self.worst_ms = lag_ms
        self._arm(now)

    def describe(self) -> Iterable:
        return []

    def collect(self) -> Iterable:
        fam = HistogramMetricFamily("kraftd_event_loop_lag_ms", "How late a 10 ms heartbeat timer on the "
                                    "event loop fired (ms): the loop's stalls")
        fam.add_metric([], self.histogram.cumulative(), self.histogram.sum)
        yield fam
        yield GaugeMetricFamily("kraftd_event_loop_lag_worst_ms", "The event loop's worst stall since the "
                                "server started (ms)", value=self.worst_ms)
