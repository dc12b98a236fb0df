"""The server side of what the real-client tests rely on, pinned down with raw requests in
kraftd's own codec against a real process: (1) after a restart, the consumer's old epoch is
fenced in all three KIP-320 APIs and the new one is served; (2) a parked full fetch opens its
session by KIP-227's eviction rule evaluated when it is answered, as Kafka does."""
from __future__ import annotations

import time

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from tests.clients.helpers import RawClient

pytestmark = pytest.mark.clients

FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, FETCH_SESSION_ID_NOT_FOUND = 74, 75, 70


def _produce(bootstrap, topic, n):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_block_ms=30_000)
    try:
        futures = [producer.send(topic, value=b"v%04d" % i, partition=0) for i in range(n)]
        producer.flush(timeout=30)
        assert all(f.succeeded() for f in futures)
    finally:
        producer.close(timeout=5)


def _fetch(raw, topic, offset, *, epoch=-1, session=(0, -1), max_wait_ms=0, version=12):
    req = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                         isolation_level=0, session_id=session[0], session_epoch=session[1],
                         topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[
                             m.FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                           current_leader_epoch=epoch, last_fetched_epoch=-1,
                                                           log_start_offset=-1, partition_max_bytes=1 << 20)])])
    return raw.request(api.FETCH, version, req)


def _list_offsets(raw, topic, epoch, timestamp=-1):
    req = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch,
                                                      timestamp=timestamp)])])
    (t,) = raw.request(api.LIST_OFFSETS, 7, req).topics
    (p,) = t.partitions
    return p


def _epoch_end(raw, topic, current_epoch, leader_epoch):
    req = m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current_epoch, leader_epoch=leader_epoch)])])
    (t,) = raw.request(api.OFFSET_FOR_LEADER_EPOCH, 4, req).topics
    (p,) = t.partitions
    return p


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill9"])
def test_old_epoch_fenced_in_every_api_after_restart(kraftd, crash):
    topic = "raw-fence"
    _produce(kraftd.bootstrap, topic, 50)
    with RawClient(kraftd.bootstrap) as raw:
        (_, epoch1), = raw.leader_epochs(topic).values()
        end1 = _list_offsets(raw, topic, epoch1).offset
        (pd,) = _fetch(raw, topic, 1, epoch=epoch1).responses[0].partitions
        assert pd.error_code == 0 and pd.high_watermark == end1
    kraftd.restart(crash=crash)
    with RawClient(kraftd.bootstrap) as raw:
        (_, epoch2), = raw.leader_epochs(topic).values()
        assert epoch2 > epoch1
        # Fetch: old epoch fenced, current served, future unknown.
        for epoch, want in ((epoch1, FENCED_LEADER_EPOCH), (epoch2, 0), (epoch2 + 1, UNKNOWN_LEADER_EPOCH)):
            (pd,) = _fetch(raw, topic, 1, epoch=epoch).responses[0].partitions
            assert pd.error_code == want, f"Fetch with epoch {epoch} (current {epoch2}): {pd.error_code}"
            if want == 0:
                assert len(pd.records or b"") > 0 and pd.high_watermark > end1
            else:
                assert not (pd.records or b"")
        # The same through a fetch session: the fenced partition is answered with 74 in a full fetch.
        resp = _fetch(raw, topic, 1, epoch=epoch1, session=(0, 0))
        assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == FENCED_LEADER_EPOCH
        # ListOffsets
        assert _list_offsets(raw, topic, epoch1).error_code == FENCED_LEADER_EPOCH
        assert _list_offsets(raw, topic, epoch2 + 1).error_code == UNKNOWN_LEADER_EPOCH
        latest = _list_offsets(raw, topic, epoch2)
        assert latest.error_code == 0 and latest.leader_epoch == epoch2 and latest.offset > end1
        # OffsetForLeaderEpoch: the consumer's old epoch ends where the new one starts.
        assert _epoch_end(raw, topic, epoch1, epoch1).error_code == FENCED_LEADER_EPOCH
        assert _epoch_end(raw, topic, epoch2 + 1, epoch1).error_code == UNKNOWN_LEADER_EPOCH
        end = _epoch_end(raw, topic, epoch2, epoch1)
        assert (end.error_code, end.leader_epoch, end.end_offset) == (0, epoch1, end1)


def test_parked_full_fetch_applies_eviction_rule_when_answered(kraftd_factory):
    """Kafka's FullFetchContext creates the session in updateAndGenerateResponseData with
    cache.maybeCreateSession(time.milliseconds(), ...): the eviction rule ("the oldest session
    has been idle for more than min.incremental.fetch.session.eviction.ms") is evaluated when
    the (possibly long-polled) full fetch is answered, not when it arrived."""
    eviction_ms, wait_ms = 400, 1500
    server = kraftd_factory(env={"KRAFTD_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS": "1",
                                 "KRAFTD_MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS": str(eviction_ms),
                                 "KRAFTD_FSYNC_POLICY": "never"})
    topic = "raw-evict-time"
    _produce(server.bootstrap, topic, 5)
    with RawClient(server.bootstrap) as x, RawClient(server.bootstrap) as y:
        hw = _list_offsets(x, topic, -1).offset
        # X opens a session (answered at once) and then stays idle.
        rx = _fetch(x, topic, 0, session=(0, 0))
        assert rx.error_code == 0 and rx.session_id != 0
        # Y's full fetch at the high watermark long-polls for wait_ms: when it is answered, X's
        # session has idled for ~wait_ms > eviction_ms, so Y's session evicts it.
        t0 = time.monotonic()
        ry = _fetch(y, topic, hw, session=(0, 0), max_wait_ms=wait_ms)
        waited = time.monotonic() - t0
        assert ry.error_code == 0 and waited * 1000 >= eviction_ms
        rx2 = _fetch(x, topic, hw, session=(rx.session_id, 1))
        assert ry.session_id != 0, (
            f"a full fetch answered after {waited * 1000:.0f} ms got no session although the only "
            f"other session had idled longer than {eviction_ms} ms (the eviction check used the "
            f"request's arrival time); X's incremental fetch then got error {rx2.error_code}")
        assert rx2.error_code == FETCH_SESSION_ID_NOT_FOUND
