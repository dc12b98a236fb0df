"""Issue 21, item 4, the shell's part: max_connections / max_connections_per_ip (a connection
over either is closed at once), parked requests dropped when their connection closes, and the
refusals on /metrics (kraftd_refused_total{what}). The whole server in-process, real node."""
from __future__ import annotations

import asyncio
import struct
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kraftd.config.settings import Settings
from kraftd.protocol import messages as m
from kraftd.server.app import KraftdServer
from kraftd.server.connection_limits import ConnectionLimits, fit_descriptor_limit
from server_client import TestClient


@pytest.fixture
async def server(tmp_path):
    servers = []

    async def make(**overrides) -> KraftdServer:
        settings = Settings.load(listen="127.0.0.1:0", metrics_listen="127.0.0.1:0", data_dir=str(tmp_path),
                                 fsync_policy="never", **overrides)
        srv = KraftdServer(settings)
        await srv.start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        if srv.node is not None:
            await srv.shutdown()


async def metrics(srv) -> dict:
    reader, writer = await asyncio.open_connection(*srv.metrics_address)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    out = {}
    for family in text_string_to_metric_families(raw.partition(b"\r\n\r\n")[2].decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def refused(values: dict, what: str) -> float:
    return values[("kraftd_refused_total", (("what", what),))]


async def api_versions(client: TestClient):
    return await client.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))


async def settle(predicate, timeout: float = 5.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def test_connection_limits_count_per_address_and_in_total():
    limits = ConnectionLimits(max_connections=3, max_connections_per_ip=2)
    assert [limits.admit("a"), limits.admit("a"), limits.admit("a")] == [None, None, "connections_per_ip"]
    assert limits.admit("b") is None
    assert limits.admit("c") == "connections"  # 3 open in all
    limits.release("a")
    assert limits.admit("c") is None and limits.from_ip("a") == 1
    for host in ("a", "b", "c"):
        limits.release(host)
    assert limits.open == 0 and limits._per_ip == {}  # no entry left per address ever seen


def test_the_caps_are_lowered_to_fit_the_open_file_limit():
    """A client must meet a cap and its refusal, not EMFILE: each partition holds two descriptors
    (its segment and its directory), each connection one."""
    assert fit_descriptor_limit(10_000, 10_000, 1_048_576) == (10_000, 10_000)
    assert fit_descriptor_limit(10_000, 10_000, None) == (10_000, 10_000)
    connections, partitions = fit_descriptor_limit(10_000, 10_000, 4096)
    assert (connections, partitions) == (1194, 1194)
    assert connections + 2 * partitions <= 4096 - 512


async def test_a_connection_over_max_connections_per_ip_is_closed_at_once(server):
    srv = await server(max_connections_per_ip=2)
    first, second = [await TestClient.connect(*srv.kafka_address) for _ in range(2)]
    assert (await api_versions(first)).error_code == 0
    third = await TestClient.connect(*srv.kafka_address)
    assert await third.closed_by_server()
    assert (await api_versions(second)).error_code == 0  # the others are untouched
    values = await metrics(srv)
    assert refused(values, "connections_per_ip") == 1 and refused(values, "connections") == 0
    assert values[("kraftd_disconnects_total", (("reason", "connection limit"),))] == 1
    first.close()
    assert await settle(lambda: len(srv.broker.connections) == 1)
    fourth = await TestClient.connect(*srv.kafka_address)  # a slot is free again
    assert (await api_versions(fourth)).error_code == 0
    for c in (second, third, fourth):
        c.close()


async def test_a_connection_over_max_connections_is_closed_at_once(server):
    srv = await server(max_connections=1)
    first = await TestClient.connect(*srv.kafka_address)
    assert (await api_versions(first)).error_code == 0
    second = await TestClient.connect(*srv.kafka_address)
    assert await second.closed_by_server()
    assert refused(await metrics(srv), "connections") == 1
    first.close()
    second.close()


async def test_parked_requests_of_a_closed_connection_are_dropped(server):
    srv = await server()
    client = await TestClient.connect(*srv.kafka_address)
    created = await client.request(19, 5, m.CreateTopicsRequest(timeout_ms=5000, topics=[
        m.CreateTopicsRequest.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=[],
                                              configs=[])]))
    assert created.topics[0].error_code == 0
    hw = srv.node.topics.partition("t", 0).high_watermark
    F = m.FetchRequest
    client.send(1, 12, F(replica_id=-1, max_wait_ms=30_000, min_bytes=1 << 20, max_bytes=1 << 20, session_id=0,
                         session_epoch=-1, topics=[F.FetchTopic(topic="t", topic_id=uuid.UUID(int=0), partitions=[
                             F.FetchPartition(partition=0, fetch_offset=hw, current_leader_epoch=-1,
                                              last_fetched_epoch=-1, log_start_offset=-1,
                                              partition_max_bytes=1 << 20)])]))
    assert await settle(lambda: srv.broker.parked_count == 1)
    assert srv.node.stats.metrics_values()["parked_requests"] == 1
    client.close()
    # Without the cancellation the long poll would stay parked for its 30 s.
    assert await settle(lambda: srv.broker.parked_count == 0 and srv.node.stats.metrics_values()["parked_requests"] == 0)
    values = await metrics(srv)
    assert values[("kraftd_parked_cancelled_total", ())] == 1
    assert values[("kraftd_parked_requests", ())] == 0


async def test_every_cap_is_on_metrics_from_the_start(server):
    srv = await server()
    values = await metrics(srv)
    for what in ("connections", "connections_per_ip", "fetch_session_partitions", "auto_create_rate",
                 "auto_create_total", "partitions", "groups", "group_members", "request_timeout"):
        assert refused(values, what) == 0
    assert values[("kraftd_producer_ids_expired_total", ())] == 0


async def test_disconnect_reasons_are_a_fixed_set_whatever_the_bytes(server):
    """kraftd_disconnects_total{reason} once had the decoder's message (and the api key and
    version) in its label: one new series per malformed frame, which grew RSS and /metrics
    without bound under mutated frames."""
    srv = await server()
    frames = [struct.pack(">hhih", key, version, 1, -1) for key, version in ((999, 1), (1000, 7), (31000, 2))]
    frames += [struct.pack(">hhih", 3, 12, 1, -1) + bytes([i]) * i for i in range(1, 6)]  # Metadata v12 garbage
    for payload in frames:
        client = await TestClient.connect(*srv.kafka_address)
        client.send_raw(payload)
        assert await client.closed_by_server()
        client.close()
    values = await metrics(srv)
    reasons = {dict(labels)["reason"]: n for (name, labels), n in values.items() if name == "kraftd_disconnects_total"}
    assert reasons == {"unsupported api": 3, "malformed request": 5}
