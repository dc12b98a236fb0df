"""The whole shell in-process (KraftdServer + Broker + real codec) driving a fake Node."""
from __future__ import annotations

import asyncio
import os
import struct
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraftd.config.settings import Settings
from kraftd.protocol import messages as m
from kraftd.quorum.peer import Peer
from kraftd.server import app as appmod
from kraftd.server.app import KraftdServer
from server_client import TestClient, fetch, produce
from server_fake_node import FakeNode


@pytest.fixture
async def server(tmp_path):
    servers = []

    async def make(**overrides) -> KraftdServer:
        settings = Settings.load(listen="127.0.0.1:0", metrics_listen="127.0.0.1:0",
                                 data_dir=str(tmp_path), **overrides)
        srv = KraftdServer(settings, FakeNode.open)
        await srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        if srv.node is not None:
            await srv.shutdown()


async def client(srv: KraftdServer) -> TestClient:
    return await TestClient.connect(*srv.kafka_address)


async def http_get(address, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection(*address)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


async def test_api_versions_round_trip(server):
    srv = await server()
    c = await client(srv)
    for version in (0, 3, 4):
        body = await c.request(18, version, m.ApiVersionsRequest(client_software_name="t",
                                                                 client_software_version="1"))
        assert body.error_code == 0
        assert {k.api_key for k in body.api_keys} >= {0, 1, 3, 18}
    # The node hears who sent it: the client's address, and no node id (it did not authenticate).
    assert srv.node.peers == {Peer(f"127.0.0.1:{c.writer.get_extra_info('sockname')[1]}")}
    c.close()


async def test_api_versions_unsupported_version_gets_v0_error(server):
    srv = await server()
    c = await client(srv)
    # An ApiVersions v99 request: the server can only parse the fixed header part.
    c.send_raw(struct.pack(">hhih", 18, 99, 1234, 2) + b"me" + b"\x00" * 5)
    size, = struct.unpack(">i", await c.reader.readexactly(4))
    payload = await c.reader.readexactly(size)
    correlation, error, count = struct.unpack_from(">ihi", payload)
    assert (correlation, error) == (1234, 35)
    ranges = [struct.unpack_from(">hhh", payload, 10 + 6 * i) for i in range(count)]
    assert (18, 0, 4) in ranges
    # The connection stays open: the client retries with a version we serve.
    body = await c.request(18, 3, m.ApiVersionsRequest())
    assert body.error_code == 0
    c.close()


async def test_unknown_api_closes_only_that_connection(server):
    srv = await server()
    bad, good = await client(srv), await client(srv)
    bad.send_raw(struct.pack(">hhih", 999, 0, 1, -1))
    assert await bad.closed_by_server()
    assert (await good.request(18, 3, m.ApiVersionsRequest())).error_code == 0
    good.close()


@pytest.mark.parametrize("payload", [b"\x00\x12", struct.pack(">hhi", 18, 3, 1) + b"\xff\xff\xff"])
async def test_malformed_request_closes_connection(server, payload):
    srv = await server()
    c = await client(srv)
    c.send_raw(payload)
    assert await c.closed_by_server()
    assert srv.serving


async def test_parked_fetch_completes_by_timer_and_holds_back_later_responses(server):
    srv = await server()
    c = await client(srv)
    started = time.monotonic()
    first = c.send(1, 12, fetch(max_wait_ms=150))
    second = c.send(18, 3, m.ApiVersionsRequest())
    got1, body1 = await c.recv()
    elapsed = time.monotonic() - started
    got2, _ = await c.recv()
    assert (got1, got2) == (first, second)
    assert body1.session_id == 7
    assert 0.12 <= elapsed < 1.0
    c.close()


async def test_acks0_produce_sends_nothing(server):
    srv = await server()
    c = await client(srv)
    c.send(0, 9, produce(acks=0))
    c._sent.clear()  # no answer is expected for it
    body = await c.request(18, 3, m.ApiVersionsRequest())
    assert body.error_code == 0
    assert srv.node.log.log_end_offset == 1
    c.close()


async def test_acks_all_produces_share_fsyncs(server):
    srv = await server(flush_interval_ms=10_000)  # only the urgent path may flush
    clients = [await client(srv) for _ in range(5)]
    for c in clients:
        for _ in range(10):
            c.send(0, 9, produce(acks=-1))
    started = time.monotonic()
    for c in clients:
        for _ in range(10):
            await c.recv()
    log = srv.node.log
    assert log.flushed_offset == 50
    assert log.flush_calls < 25, "expected group commit, got one fsync per produce"
    assert time.monotonic() - started < 5
    for c in clients:
        c.close()


@pytest.mark.parametrize("small,inline_max,on_loop", [(True, 65536, True), (False, 65536, False),
                                                     (True, 0, False)])
async def test_a_small_flush_runs_on_the_loop_and_others_in_the_pool(server, small, inline_max, on_loop):
    """Without AIO (fsync_aio off, or a kernel without it)."""
    srv = await server(fsync_inline_max_bytes=inline_max, flush_interval_ms=10_000, fsync_aio=False)
    srv.node.log.small = small
    c = await client(srv)
    await c.request(0, 9, produce(acks=-1))
    assert srv.node.log.flushed_offset == 1
    loop_thread = threading.get_ident()
    assert srv.node.log.flush_threads and all((t == loop_thread) == on_loop for t in srv.node.log.flush_threads)
    c.close()


async def test_with_aio_a_plain_fsync_flush_needs_no_thread(server, tmp_path):
    srv = await server(flush_interval_ms=10_000)
    assert srv.broker.flusher.uses_aio, "native AIO fsync works on this machine's Linux"
    fd = os.open(tmp_path / "segment", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * 100)
        srv.node.log.aio_fd = fd
        c = await client(srv)
        await c.request(0, 9, produce(acks=-1))
        assert srv.node.log.flushed_offset == 1
        assert srv.node.log.flush_threads == []  # log.flush() never ran: the kernel fsynced the fd
        assert srv.node.log.end_flush_threads == [threading.get_ident()]
        c.close()
    finally:
        os.close(fd)


async def test_with_aio_an_fsync_the_kernel_refuses_goes_to_the_pool_and_its_failure_stops(server):
    """A pipe has no fsync: io_submit refuses it, the pool's os.fsync fails too, and a failed
    fsync stops the server (as Kafka halts)."""
    srv = await server(flush_interval_ms=10_000)
    r, w = os.pipe()
    try:
        srv.node.log.aio_fd = w
        assert await an_acks_all_produce_stops_it(srv)
        assert isinstance(srv.broker.fatal, OSError)
        assert srv.node.log.flushed_offset == 0
    finally:
        os.close(r)
        os.close(w)


async def test_background_flush_runs_every_interval(server):
    srv = await server(flush_interval_ms=50)
    c = await client(srv)
    await c.request(0, 9, produce(acks=1))  # not waiting for fsync...
    await asyncio.sleep(0.3)
    assert srv.node.log.flushed_offset == 1  # ...but fsynced in the background
    c.close()


async def test_fsync_policy_never_does_not_flush(server):
    srv = await server(fsync_policy="never", flush_interval_ms=20)
    c = await client(srv)
    await c.request(0, 9, produce(acks=-1))
    await asyncio.sleep(0.2)
    assert srv.node.log.flush_calls == 0
    c.close()


async def an_acks_all_produce_stops_it(srv) -> bool:
    """Send one acks=-1 produce; True once the broker gives up (its fsync failed)."""
    stopped = []
    srv.broker.on_fatal = lambda: stopped.append(True)
    c = await client(srv)
    c.send(0, 9, produce(acks=-1))
    for _ in range(100):
        if stopped:
            break
        await asyncio.sleep(0.02)
    c.close()
    return bool(stopped)


async def test_failed_fsync_stops_the_server(server):
    srv = await server()
    srv.node.log.fail = True
    assert await an_acks_all_produce_stops_it(srv)
    assert srv.broker.fatal is not None


async def test_metrics_and_healthz(server):
    srv = await server()
    c = await client(srv)
    await c.request(18, 3, m.ApiVersionsRequest())
    await c.request(0, 9, produce(acks=1))
    status, text = await http_get(srv.metrics_address, "/metrics")
    assert status == 200
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert samples[("kraftd_requests_total", (("api", "ApiVersions"), ("version", "3")))] == 1
    assert samples[("kraftd_requests_total", (("api", "Produce"), ("version", "9")))] == 1
    assert samples[("kraftd_request_latency_seconds_count", (("api", "Produce"),))] == 1
    assert samples[("kraftd_connections_open", ())] == 1
    assert samples[("kraftd_connections_total", ())] == 1
    assert samples[("kraftd_bytes_in_total", ())] > 0
    assert samples[("kraftd_bytes_out_total", ())] > 0
    partition = (("partition", "0"), ("topic", "t"))
    assert samples[("kraftd_log_end_offset", partition)] == 1
    assert samples[("kraftd_log_start_offset", partition)] == 0
    assert ("kraftd_high_watermark", partition) in samples
    assert samples[("kraftd_fake_gauge", ())] == 3
    assert samples[("kraftd_fake_events_total", ())] == 1
    assert samples[("kraftd_num_incremental_fetch_sessions", ())] == 2
    assert samples[("kraftd_num_incremental_fetch_partitions_cached", ())] == 10
    assert samples[("kraftd_incremental_fetch_session_evictions_total", ())] == 4
    kv = (("partition", "0"), ("topic", "kv"))
    assert samples[("kraftd_snapshot_lag", kv)] == 5
    assert samples[("kraftd_snapshot_size_bytes", kv)] == 100
    assert samples[("kraftd_load_snapshot_latency_ms_count", kv)] == 1
    assert samples[("kraftd_load_snapshot_latency_ms_sum", kv)] == 12
    assert await http_get(srv.metrics_address, "/healthz") == (200, "ok\n")
    assert (await http_get(srv.metrics_address, "/nope"))[0] == 404
    c.close()


async def test_shutdown_answers_in_flight_then_closes_node(server, monkeypatch):
    srv = await server()
    c = await client(srv)
    c.send(1, 12, fetch(max_wait_ms=200))
    c.send(0, 9, produce(acks=-1))
    await asyncio.sleep(0.05)
    node = srv.node
    shutdown = asyncio.create_task(srv.shutdown())
    await asyncio.sleep(0.01)
    assert not srv.serving
    assert (await c.recv())[1].session_id == 7  # the parked fetch still got its answer
    await c.recv()
    await shutdown
    assert node.closed and node.log.flushed_offset == 1
    assert await c.closed_by_server()
    with pytest.raises(OSError):
        await TestClient.connect(*srv.kafka_address)


async def test_shutdown_grace_is_bounded(server, monkeypatch):
    monkeypatch.setattr(appmod, "SHUTDOWN_GRACE_S", 0.2)
    srv = await server()
    c = await client(srv)
    c.send(1, 12, fetch(max_wait_ms=60_000))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await srv.shutdown()
    assert time.monotonic() - started < 2
    assert await c.closed_by_server()


async def test_parked_fetch_makes_the_group_commit_hurry(server):
    # The HW moves only with fsync: a consumer long-polling on acks=1 data must not wait for
    # the next flush interval (10 s here) to see it.
    srv = await server(flush_interval_ms=10_000)
    c = await client(srv)
    await c.request(0, 9, produce(acks=1))
    assert srv.node.log.flush_calls == 0  # nobody waits yet: the interval decides
    c.send(1, 12, fetch(max_wait_ms=100))
    await c.recv()
    assert srv.node.log.flush_calls >= 1
    c.close()


async def http_post(address, target: str) -> tuple[int, dict]:
    import json

    reader, writer = await asyncio.open_connection(*address)
    writer.write(f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


async def test_admin_snapshot_runs_the_job_in_a_worker_thread(server):
    srv = await server()
    status, body = await http_post(srv.metrics_address, "/admin/snapshot?topic=kv&partition=0")
    assert (status, body["requested"]) == (202, True)
    for _ in range(100):
        if srv.node.snapshots_done:
            break
        await asyncio.sleep(0.02)
    ((job, error),) = srv.node.snapshots_done
    assert error is None and job.thread.startswith("kraftd-snap")
    assert (await http_post(srv.metrics_address, "/admin/snapshot?topic=plain&partition=0"))[0] == 404
    assert (await http_post(srv.metrics_address, "/admin/snapshot?topic=kv"))[0] == 400
    _, text = await http_get(srv.metrics_address, "/metrics")
    assert "kraftd_snapshots_written_total 1.0" in text


async def test_failed_snapshot_is_reported_to_the_node(server):
    srv = await server()
    srv.node.snapshot_fail = True
    await http_post(srv.metrics_address, "/admin/snapshot?topic=kv&partition=0")
    for _ in range(100):
        if srv.node.snapshots_done:
            break
        await asyncio.sleep(0.02)
    ((job, error),) = srv.node.snapshots_done
    assert isinstance(error, OSError)
    assert srv.serving
