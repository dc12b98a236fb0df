"""The loop-lag monitor sees a stall of the event loop, and /metrics shows it."""
from __future__ import annotations

import asyncio
import time

from prometheus_client import generate_latest

from kraftd.server.loop_lag import LoopLagMonitor
from kraftd.server.metrics import ServerMetrics


async def test_a_blocking_callback_shows_as_lag():
    monitor = LoopLagMonitor(interval_s=0.005)
    monitor.start()
    await asyncio.sleep(0.05)
    assert monitor.worst_ms < 30
    time.sleep(0.08)  # block the loop
    await asyncio.sleep(0.03)
    monitor.stop()
    assert 60 <= monitor.worst_ms < 1000
    buckets = dict(monitor.histogram.cumulative())
    assert buckets["50.0"] < buckets["+Inf"]  # one heartbeat landed past 50 ms


async def test_metrics_expose_the_lag_histogram_and_the_worst():
    metrics = ServerMetrics()
    metrics.loop_lag.start()
    time.sleep(0.03)
    await asyncio.sleep(0.03)
    metrics.loop_lag.stop()
    text = generate_latest(metrics.registry).decode()
    assert "# TYPE kraftd_event_loop_lag_ms histogram" in text
    worst = [line for line in text.splitlines() if line.startswith("kraftd_event_loop_lag_worst_ms ")]
    assert worst and float(worst[0].split()[1]) >= 15
