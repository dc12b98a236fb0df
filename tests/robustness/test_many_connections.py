"""Item D: hundreds of connections that send nothing or half a frame do not disturb a
well-behaved client, and idle ones are closed after connections_max_idle_ms."""
from __future__ import annotations

import selectors
import socket
import struct
import time
import urllib.request

from .support import GoodClient, RawClient, failure_signatures, sentinel_frame, server_failures, wait_until

IDLE_MS = 2000
N = 500


def _open_metric(server) -> float | None:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                      timeout=5).read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("kraftd_connections_open") and not line.startswith("#"):
            return float(line.split()[-1])
    return None


def test_many_idle_and_half_frame_connections(kraftd_factory):
    server = kraftd_factory(env={"KRAFTD_CONNECTIONS_MAX_IDLE_MS": str(IDLE_MS)})
    good = GoodClient(server.port, pause_s=0.05)  # active: never idle for 2 s
    good.start()
    assert wait_until(lambda: good.rounds >= 3 or good.errors, 10), good.errors

    socks = []
    half = sentinel_frame()[:len(sentinel_frame()) // 2]
    t_open = time.monotonic()
    for i in range(N):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        kind = i % 3
        if kind == 1:
            s.sendall(half)                      # half a frame
        elif kind == 2:
            s.sendall(struct.pack(">i", 1000))   # just a size prefix
        socks.append(s)
    opened = time.monotonic() - t_open

    # the good client keeps working while they are all open
    rounds = good.rounds
    assert wait_until(lambda: good.rounds >= rounds + 10 or good.errors, 10), good.errors
    assert not good.errors, good.errors

    # a fresh client is served promptly despite them
    t0 = time.monotonic()
    c = RawClient(server.port)
    c.create_topic("many-conn")
    c.close()
    assert time.monotonic() - t0 < 2

    # every idle connection is closed by the server after ~IDLE_MS
    deadline = t_open + IDLE_MS / 1000 + 5
    pending = {s.fileno(): s for s in socks}
    closed_at = []
    # (a selector, not select(): descriptors past 1023 are normal when earlier tests left some open)
    watching = selectors.DefaultSelector()
    for s in socks:
        watching.register(s, selectors.EVENT_READ)
    while pending and time.monotonic() < deadline:
        for key, _ in watching.select(0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b"", f"unexpected answer on an idle connection: {data[:20]!r}"
            closed_at.append(time.monotonic() - t_open)
            watching.unregister(s)
            del pending[s.fileno()]
    watching.close()
    for s in socks:
        s.close()
    print(f"\n{N} connections opened in {opened:.2f}s; closed by the server after "
          f"{min(closed_at, default=0):.2f}..{max(closed_at, default=0):.2f}s; "
          f"still open: {len(pending)}; good client max latency {good.max_latency * 1000:.0f} ms")
    assert not pending, f"{len(pending)} idle connections were not closed within {IDLE_MS} ms + 5 s"
    assert min(closed_at) >= IDLE_MS / 1000 - 0.5, "closed before the idle timeout"

    # the active good client was not closed as idle, and still works
    rounds = good.rounds
    assert wait_until(lambda: good.rounds >= rounds + 5 or good.errors, 10)
    good.finish()
    assert not good.errors, good.errors
    assert wait_until(lambda: (n := _open_metric(server)) is not None and n <= 1, 5), _open_metric(server)
    assert server.alive()
    assert not server_failures(server.log_lines), failure_signatures(server.log_lines)


def test_connection_idle_between_requests_is_closed_then_reconnect_works(kraftd_factory):
    server = kraftd_factory(env={"KRAFTD_CONNECTIONS_MAX_IDLE_MS": str(IDLE_MS)})
    c = RawClient(server.port)
    c.create_topic("idle")
    time.sleep(IDLE_MS / 1000 + 1.5)
    c.sock.settimeout(3)
    assert c.sock.recv(1) == b"", "idle connection not closed"
    c.close()
    c = RawClient(server.port)
    c.create_topic("idle")
    c.close()
