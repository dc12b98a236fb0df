"""Followers refuse what only a leader may answer, as on Kafka (issue 20).

One table: every client-facing partition API, sent to a follower of "t"-0 (node 1, led by node 2
at epoch 5), gets NOT_LEADER_OR_FOLLOWER for the partition, and where the answer carries a
current leader (Fetch, FetchSnapshot, Produce v10+) it names node 2 at epoch 5. Nothing on the
follower changes. The one exception, as on Kafka: ListOffsets from a debugging consumer
(replica id -2) is answered from the follower's own log.
"""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .node_context import batch_of
from .raft.raft_context import TOPIC, RaftTestContext

LEADER, EPOCH = 2, 5
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def _list_offsets(replica_id: int, timestamp: int = -1):
    return m.ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])


def _offset_for_leader_epoch():
    return m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=TOPIC, partitions=[m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=EPOCH)])])


def _delete_records():
    return m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name=TOPIC, partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=2)])])


def _produce():
    return m.ProduceRequest(acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch_of(["x"]))])])


def _consumer_fetch():
    return m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                          session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                              m.FetchRequest.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                            last_fetched_epoch=-1, log_start_offset=-1,
                                                            partition_max_bytes=1 << 20)])])


def _fetch_snapshot():
    return m.FetchSnapshotRequest(cluster_id=None, replica_id=-1, max_bytes=1 << 20, topics=[
        m.FetchSnapshotRequest.TopicSnapshot(name=TOPIC, partitions=[m.FetchSnapshotRequest.PartitionSnapshot(
            partition=0, current_leader_epoch=-1, snapshot_id=m.FetchSnapshotRequest.SnapshotId(end_offset=3, epoch=EPOCH),
            position=0)])])


def _only(response, topics_attr: str, partitions_attr: str):
    [topic] = getattr(response, topics_attr)
    [partition] = getattr(topic, partitions_attr)
    return partition


# (name, api key, version, request builder, (topics attribute, partitions attribute), leader hint attribute)
CLIENT_PARTITION_APIS = [
    ("Produce v9", api.PRODUCE, 9, _produce, ("responses", "partition_responses"), None),
    # v10 carries a leader hint only with the leader's endpoint, which needs the metadata image of a
    # cluster (tests/cluster/test_follower_refusals.py checks it there).
    ("Produce v10", api.PRODUCE, 10, _produce, ("responses", "partition_responses"), None),
    ("Fetch", api.FETCH, 12, _consumer_fetch, ("responses", "partitions"), "current_leader"),
    ("ListOffsets", api.LIST_OFFSETS, 7, lambda: _list_offsets(-1), ("topics", "partitions"), None),
    ("OffsetForLeaderEpoch", api.OFFSET_FOR_LEADER_EPOCH, 4, _offset_for_leader_epoch, ("topics", "partitions"), None),
    ("DeleteRecords", api.DELETE_RECORDS, 2, _delete_records, ("topics", "partitions"), None),
    ("FetchSnapshot", api.FETCH_SNAPSHOT, 0, _fetch_snapshot, ("topics", "partitions"), "current_leader"),
]


@pytest.fixture
def follower() -> RaftTestContext:
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(EPOCH, LEADER) \
        .append_to_log(EPOCH, 3).build()
    assert ctx.partition.leader_id == LEADER and not ctx.partition.is_leader
    return ctx


def _state(ctx: RaftTestContext):
    p = ctx.partition
    return (p.log.log_start_offset, p.log.log_end_offset, p.high_watermark, p.leader_epoch, p.leader_id)


@pytest.mark.parametrize("name,key,version,build,attrs,hint", CLIENT_PARTITION_APIS,
                         ids=[row[0] for row in CLIENT_PARTITION_APIS])
def test_a_follower_refuses_every_client_partition_api(follower, name, key, version, build, attrs, hint):
    before = _state(follower)
    outcome = follower.handle(build(), key, version, source=99)
    out = _only(outcome.response, *attrs)
    assert out.error_code == NOT_LEADER, (name, out)
    if key == api.PRODUCE and version >= 10:
        assert outcome.response.node_endpoints == [] and out.current_leader.leader_id == -1
    if hint is not None:
        leader = getattr(out, hint)
        assert (leader.leader_id, leader.leader_epoch) == (LEADER, EPOCH), (name, out)
    assert _state(follower) == before, f"{name} changed the follower"


def test_a_debugging_consumer_may_list_offsets_on_a_follower(follower):
    out = _only(follower.handle(_list_offsets(-2), api.LIST_OFFSETS, 7, source=99).response, "topics", "partitions")
    assert out.error_code == 0
    assert out.offset == follower.partition.log.log_end_offset == 3  # its own log end, not a HW
    earliest = _only(follower.handle(_list_offsets(-2, timestamp=-2), api.LIST_OFFSETS, 7, source=99).response,
                     "topics", "partitions")
    assert (earliest.error_code, earliest.offset, earliest.leader_epoch) == (0, 0, EPOCH)


def test_an_offset_for_leader_epoch_from_a_follower_is_never_a_false_truncation(follower):
    # The bug this replaces: the follower answered epoch 0, end offset 0, which a validating
    # consumer takes for a truncation to 0.
    out = _only(follower.handle(_offset_for_leader_epoch(), api.OFFSET_FOR_LEADER_EPOCH, 4, source=99).response,
                "topics", "partitions")
    assert (out.error_code, out.leader_epoch, out.end_offset) == (NOT_LEADER, -1, -1)


def test_the_epoch_check_comes_before_leadership(follower):
    """KIP-320: a fenced epoch is reported as such, even by a follower (Kafka checks it first)."""
    request = _list_offsets(-1)
    request.topics[0].partitions[0].current_leader_epoch = EPOCH - 1
    out = _only(follower.handle(request, api.LIST_OFFSETS, 7, source=99).response, "topics", "partitions")
    assert out.error_code == ErrorCode.FENCED_LEADER_EPOCH
    request.topics[0].partitions[0].current_leader_epoch = EPOCH + 1
    out = _only(follower.handle(request, api.LIST_OFFSETS, 7, source=99).response, "topics", "partitions")
    assert out.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
