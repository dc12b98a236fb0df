"""Item C: SIGTERM while a producer and a long-polling consumer are active -> the process
exits 0 within a few seconds, and after a restart everything acknowledged is there."""
from __future__ import annotations

import threading
import time

from .support import (ConnectionClosed, RawClient, batch_of, failure_signatures,
                      server_failures, wait_until)

EXIT_WITHIN_S = 8.0  # a parked long-poll holds shutdown for SHUTDOWN_GRACE_S (5 s); + margin


class Producer(threading.Thread):
    def __init__(self, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.port, self.topic = port, topic
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        c = RawClient(self.port, timeout=15)
        i = 0
        try:
            while not self.stopped.is_set():
                values = [f"p{i}-{j}".encode() for j in range(4)]
                i += 1
                out = c.produce(self.topic, batch_of(values), acks=-1)
                if out.error_code != 0:
                    self.errors.append(f"produce error {out.error_code}")  # e.g. timed out at shutdown
                    continue
                self.acked.extend((out.base_offset + j, v) for j, v in enumerate(values))
        except (ConnectionClosed, OSError):
            pass  # the server went away: expected at SIGTERM
        finally:
            c.close()


class LongPoller(threading.Thread):
    """Fetches with max_wait 20 s: most of its requests are parked in the server."""

    def __init__(self, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.port, self.topic = port, topic
        self.fetches = 0
        self.errors: list[str] = []

    def run(self) -> None:
        c = RawClient(self.port, timeout=30)
        offset = 0
        try:
            while True:
                p = c.fetch(self.topic, offset, max_wait_ms=20_000, min_bytes=1 << 20)
                self.fetches += 1
                if p.error_code not in (0, 3):  # 3: topic not there yet
                    self.errors.append(f"fetch error {p.error_code}")
                    return
                offset = max(offset, p.high_watermark)
        except (ConnectionClosed, OSError):
            pass
        finally:
            c.close()


def test_sigterm_with_active_producer_and_long_poll(kraftd):
    producer = Producer(kraftd.port, "sigterm-data")
    producer.start()
    assert wait_until(lambda: len(producer.acked) >= 40, 15), producer.errors
    pollers = [LongPoller(kraftd.port, "sigterm-data"), LongPoller(kraftd.port, "sigterm-empty")]
    for p in pollers:
        p.start()
    time.sleep(1.0)  # the empty-topic poller is now parked for up to 20 s
    t0 = time.monotonic()
    code = kraftd.stop(timeout=EXIT_WITHIN_S + 10)
    took = time.monotonic() - t0
    producer.stopped.set()
    producer.join(20)
    for p in pollers:
        p.join(35)
    print(f"\nSIGTERM: exit {code} after {took:.2f}s; {len(producer.acked)} records acked")
    print("\n".join(line for line in kraftd.log_lines if "shutting down" in line or "stopped" in line))
    assert code == 0, "\n".join(kraftd.log_lines[-30:])
    assert took < EXIT_WITHIN_S, f"shutdown took {took:.1f}s"
    assert not server_failures(kraftd.log_lines), failure_signatures(kraftd.log_lines)
    for p in pollers:
        assert not p.errors, p.errors
    acked = list(producer.acked)

    kraftd.start()
    c = RawClient(kraftd.port)
    try:
        got = dict((o, v) for o, _, v in c.read_all("sigterm-data"))
    finally:
        c.close()
    missing = [(o, v) for o, v in acked if got.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:3]}"


def test_sigterm_idle_server_exits_fast(kraftd):
    t0 = time.monotonic()
    assert kraftd.stop(timeout=10) == 0
    assert time.monotonic() - t0 < 3
