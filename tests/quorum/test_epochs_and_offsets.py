"""KIP-320 in the core: epochs across restarts, fencing, divergence, ListOffsets, OffsetForLeaderEpoch."""
import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .node_context import START_MS, NodeTestContext, batch_of, values_in


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_topic("t").build()


def list_offsets(ctx, timestamp, *, current_leader_epoch=-1, version=7):
    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])
    return ctx.respond(request, version).topics[0].partitions[0]


def end_offset_for(ctx, epoch, *, current_leader_epoch=-1):
    request = m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="t", partitions=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=epoch)])])
    return ctx.respond(request, 4).topics[0].partitions[0]


def test_every_start_leads_at_a_higher_epoch_with_its_own_start_offset(ctx):
    first_epoch = ctx.node.leader_epoch
    ctx.produce_ok("t", 0, ["a", "b"])
    ctx.flush()
    ctx = ctx.restart()
    assert ctx.node.leader_epoch == first_epoch + 1
    log = ctx.node.topics.partition("t", 0).log
    assert log.epoch_cache.end_offset_for(first_epoch, log.log_end_offset) == (first_epoch, 3)
    assert values_in(ctx.fetch("t", 0, 0)) == [b"a", b"b"]


def test_fetch_with_an_old_epoch_is_fenced_and_told_the_leader(ctx):
    epoch = ctx.node.leader_epoch
    data = ctx.fetch("t", 0, 0, current_leader_epoch=epoch - 1)
    assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (ctx.config.node_id, epoch)
    assert ctx.fetch("t", 0, 0, current_leader_epoch=epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ctx.fetch("t", 0, 0, current_leader_epoch=epoch).error_code == 0


def test_fetch_from_a_diverged_position_gets_the_diverging_epoch(ctx):
    ctx.produce_ok("t", 0, ["a"])
    ctx.flush()
    old_epoch = ctx.node.leader_epoch
    ctx = ctx.restart()
    ctx.produce_ok("t", 0, ["b"])
    ctx.flush()
    # A fetcher claiming epoch old_epoch reached offset 5, but that epoch ended at 2 here.
    data = ctx.fetch("t", 0, 5, last_fetched_epoch=old_epoch)
    assert data.error_code == 0
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (old_epoch, 2)
    assert values_in(data) == []
    assert ctx.fetch("t", 0, 2, last_fetched_epoch=old_epoch).diverging_epoch == m.FetchResponse.EpochEndOffset()


def test_a_consumer_that_read_a_newer_epoch_than_ours_is_told_to_refresh(ctx):
    """Its metadata named a stale leader (us): UNKNOWN_LEADER_EPOCH, retriable, not a truncation
    and not INVALID_REQUEST (KIP-595's rule, which stays for replicas' fetches)."""
    epoch = ctx.node.leader_epoch
    data = ctx.fetch("t", 0, 0, current_leader_epoch=epoch, last_fetched_epoch=epoch + 1)
    assert data.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_consumer_between_the_hw_and_the_log_end_gets_nothing_yet_not_out_of_range(ctx):
    """A new leader's HW trails the old leader's for a moment; a consumer positioned at the old
    HW must wait, not reset its offset (Kafka answers out of range only past the log end)."""
    ctx.produce("t", 0, batch_of(["a"]))
    ctx.flush()
    hw = ctx.fetch("t", 0, 0).high_watermark
    ctx.produce("t", 0, batch_of(["b"]))  # appended, not yet durable: the HW stays
    data = ctx.fetch("t", 0, hw + 1)
    assert data.error_code == 0 and data.high_watermark == hw and not data.records
    assert ctx.fetch("t", 0, hw + 5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_list_offsets_latest_earliest_and_max_timestamp_carry_epochs(ctx):
    epoch = ctx.node.leader_epoch
    ctx.produce("t", 0, batch_of(["a"], timestamp=START_MS + 10))
    ctx.produce("t", 0, batch_of(["b"], timestamp=START_MS + 50))
    ctx.produce("t", 0, batch_of(["c"], timestamp=START_MS + 20))
    ctx.flush()
    latest = list_offsets(ctx, -1)
    assert (latest.offset, latest.leader_epoch) == (4, epoch)
    earliest = list_offsets(ctx, -2)
    assert (earliest.offset, earliest.leader_epoch) == (0, epoch)
    top = list_offsets(ctx, -3)
    assert (top.offset, top.timestamp, top.leader_epoch) == (2, START_MS + 50, epoch)
    by_time = list_offsets(ctx, START_MS + 15)
    assert (by_time.offset, by_time.timestamp) == (2, START_MS + 50)
    assert list_offsets(ctx, START_MS + 99).offset == -1


def test_list_offsets_is_fenced_by_epoch(ctx):
    epoch = ctx.node.leader_epoch
    assert list_offsets(ctx, -1, current_leader_epoch=epoch - 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert list_offsets(ctx, -1, current_leader_epoch=epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_offset_for_leader_epoch_answers_from_the_epoch_cache(ctx):
    first = ctx.node.leader_epoch
    ctx.produce_ok("t", 0, ["a", "b"])
    ctx.flush()
    ctx = ctx.restart()
    ctx.produce_ok("t", 0, ["c"])
    ctx.flush()
    second = ctx.node.leader_epoch
    assert (r := end_offset_for(ctx, first)).error_code == 0 and (r.leader_epoch, r.end_offset) == (first, 3)
    assert (r := end_offset_for(ctx, second)) and (r.leader_epoch, r.end_offset) == (second, 5)
    assert (r := end_offset_for(ctx, second + 5)) and (r.error_code, r.leader_epoch, r.end_offset) == (0, -1, -1)
    assert end_offset_for(ctx, first, current_leader_epoch=first).error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_metadata_reports_leader_epoch_and_topic_id(ctx):
    response = ctx.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t")],
                                             allow_auto_topic_creation=False), 12)
    topic = response.topics[0]
    assert topic.topic_id == ctx.node.topics.get("t").topic_id
    assert topic.partitions[0].leader_epoch == ctx.node.leader_epoch
    assert response.cluster_id == ctx.node.cluster_id


def test_metadata_does_not_create_when_not_allowed_and_rejects_bad_names(ctx):
    Topic = m.MetadataRequest.MetadataRequestTopic
    response = ctx.respond(m.MetadataRequest(topics=[Topic(name="nope"), Topic(name="bad name!")],
                                             allow_auto_topic_creation=False), 12)
    assert [t.error_code for t in response.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                       ErrorCode.INVALID_TOPIC_EXCEPTION]
    created = ctx.respond(m.MetadataRequest(topics=[Topic(name="yes")], allow_auto_topic_creation=True), 12)
    assert created.topics[0].error_code == 0 and len(created.topics[0].partitions) == 1


def test_create_topics_validation(ctx):
    assert ctx.create_topic("t").error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert ctx.create_topic("c", configs={"cleanup.policy": "compact,snapshot"}).error_code == ErrorCode.INVALID_CONFIG
    assert ctx.create_topic("u", configs={"no.such": "1"}).error_code == ErrorCode.INVALID_CONFIG
    ok = ctx.create_topic("s", partitions=3, configs={"retention.ms": "1000"})
    assert ok.error_code == 0 and ok.num_partitions == 3
    assert {c.name: c.value for c in ok.configs}["retention.ms"] == "1000"


def test_delete_records_moves_the_log_start_but_not_past_the_high_watermark(ctx):
    ctx.produce_ok("t", 0, ["a", "b", "c"])
    ctx.flush()
    Topic, Part = m.DeleteRecordsRequest.DeleteRecordsTopic, m.DeleteRecordsRequest.DeleteRecordsPartition

    def delete(offset):
        request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[Topic(name="t", partitions=[
            Part(partition_index=0, offset=offset)])])
        return ctx.respond(request, 2).topics[0].partitions[0]

    assert delete(9).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    done = delete(2)
    assert (done.error_code, done.low_watermark) == (0, 2)
    assert ctx.fetch("t", 0, 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert values_in(ctx.fetch("t", 0, 2), from_offset=2) == [b"b", b"c"]
    assert list_offsets(ctx, -2).offset == 2


def test_init_producer_id_hands_out_fresh_ids_across_restarts(ctx):
    request = m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
    first = ctx.respond(request, 4).producer_id
    ctx = ctx.restart()
    second = ctx.respond(request, 4).producer_id
    assert second > first
    transactional = m.InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000)
    assert ctx.respond(transactional, 4).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_find_coordinator_names_this_node_and_creates_the_offsets_topic(ctx):
    """A single node leads every __consumer_offsets partition; the first lookup creates the
    topic (snapshot policy); transactional ids still have no coordinator."""
    single = ctx.respond(m.FindCoordinatorRequest(key="g", key_type=0), 3)
    assert (single.error_code, single.node_id) == (ErrorCode.NONE, 1)
    topic = ctx.node.topics.get("__consumer_offsets")
    assert topic is not None and len(topic.partitions) == 50 and topic.config.is_snapshot_policy
    batched = ctx.respond(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
    assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [
        ("a", ErrorCode.NONE, 1), ("b", ErrorCode.NONE, 1)]
    transactional = ctx.respond(m.FindCoordinatorRequest(key="tx", key_type=1), 3)
    assert transactional.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_init_producer_id_bumps_only_the_epoch_the_producer_holds(ctx):
    """KIP-360: a producer with an id may bump the epoch its batches carry; an older epoch is
    fenced; an id without state here gets a fresh id instead of an echo."""
    from kraftd.protocol.records import build_batch
    pid = ctx.respond(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000), 4).producer_id
    batch = build_batch([(b"k", b"v", None, 1)], producer_id=pid, producer_epoch=3, base_sequence=0)
    produce = m.ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        m.ProduceRequest.TopicProduceData(name="pids", partition_data=[
            m.ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    ctx.respond(produce, 9)
    ctx.respond(produce, 9)  # auto-created on the first; appended now
    bump = ctx.respond(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                               producer_id=pid, producer_epoch=3), 4)
    assert (bump.error_code, bump.producer_id, bump.producer_epoch) == (0, pid, 4)
    stale = ctx.respond(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                producer_id=pid, producer_epoch=2), 4)
    assert stale.error_code == ErrorCode.PRODUCER_FENCED
    unknown = ctx.respond(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                  producer_id=pid + 500, producer_epoch=7), 4)
    assert unknown.error_code == 0 and unknown.producer_id not in (pid, pid + 500) and unknown.producer_epoch == 0
