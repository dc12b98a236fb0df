"""Produce and Fetch through the sans-IO core: offsets, durability gating, long polls, sizes."""
import pytest

from kraftd.protocol.errors import ErrorCode

from .node_context import NoResponse, NodeTestContext, Park, Respond, batch_of, values_in


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_topic("t", partitions=2).build()


def test_produced_records_come_back_in_order_after_the_leader_change_batch(ctx):
    # Offset 0 holds the epoch's LeaderChange control batch.
    first = ctx.produce_ok("t", 0, ["a", "b", "c"])
    second = ctx.produce_ok("t", 0, ["d"])
    assert (first.base_offset, second.base_offset) == (1, 4)
    ctx.flush()
    data = ctx.fetch("t", 0, 0)
    assert data.error_code == 0 and data.high_watermark == 5
    assert values_in(data) == [b"a", b"b", b"c", b"d"]


def test_high_watermark_waits_for_fsync_under_the_default_policy(ctx):
    ctx.produce_ok("t", 0, ["a"], acks=1)
    assert ctx.fetch("t", 0, 1).high_watermark == 1  # appended but not yet durable
    assert values_in(ctx.fetch("t", 0, 1)) == []
    ctx.flush()
    assert values_in(ctx.fetch("t", 0, 1)) == [b"a"]


def test_acks_all_is_parked_until_flushed(ctx):
    outcome = ctx.produce("t", 0, batch_of(["x"]), acks=-1)
    assert isinstance(outcome, Park)
    assert outcome.token not in ctx.completions
    ctx.flush()
    response = ctx.completions[outcome.token]
    assert response.responses[0].partition_responses[0].error_code == 0
    assert response.responses[0].partition_responses[0].base_offset == 1


def test_acks_all_times_out_when_never_flushed(ctx):
    outcome = ctx.produce("t", 0, batch_of(["x"]), acks=-1, timeout_ms=100)
    ctx.advance(101)
    out = ctx.completions[outcome.token].responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.REQUEST_TIMED_OUT


def test_acks_zero_sends_nothing(ctx):
    assert isinstance(ctx.produce("t", 0, batch_of(["x"]), acks=0), NoResponse)


def test_fsync_never_moves_the_high_watermark_at_once(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_config(fsync_policy="never").with_topic("t").build()
    ctx.produce_ok("t", 0, ["a"], acks=-1)
    assert values_in(ctx.fetch("t", 0, 1)) == [b"a"]


def test_long_poll_fetch_wakes_when_data_becomes_durable(ctx):
    outcome = ctx.deliver(ctx.fetch_request("t", 1, 1, max_wait_ms=5000, min_bytes=1), 12)
    assert isinstance(outcome, Park)
    ctx.produce_ok("t", 1, ["late"])
    assert outcome.token not in ctx.completions
    ctx.flush()
    data = ctx.completions[outcome.token].responses[0].partitions[0]
    assert values_in(data) == [b"late"]


def test_long_poll_fetch_expires_with_an_empty_answer(ctx):
    outcome = ctx.deliver(ctx.fetch_request("t", 1, 1, max_wait_ms=500, min_bytes=1), 12)
    ctx.advance(499)
    assert outcome.token not in ctx.completions
    ctx.advance(1)
    data = ctx.completions[outcome.token].responses[0].partitions[0]
    assert data.error_code == 0 and values_in(data) == []


def test_fetch_outside_the_log_is_out_of_range(ctx):
    ctx.produce_ok("t", 0, ["a"])
    ctx.flush()
    assert ctx.fetch("t", 0, 3).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert ctx.fetch("t", 0, 2).error_code == 0  # the high watermark itself is fine (empty)


def test_first_batch_is_returned_even_when_larger_than_the_limit(ctx):
    ctx.produce_ok("t", 0, ["x" * 5000])
    ctx.produce_ok("t", 0, ["y"])
    ctx.flush()
    data = ctx.fetch("t", 0, 1, partition_max_bytes=100)
    assert values_in(data) == [b"x" * 5000]  # KIP-74: one whole batch, not more


def test_fetch_by_topic_id_from_v13(ctx):
    ctx.produce_ok("t", 0, ["a"])
    ctx.flush()
    response = ctx.respond(ctx.fetch_request("t", 0, 1, version=13), 13)
    assert response.responses[0].topic_id == ctx.node.topics.get("t").topic_id
    assert values_in(response.responses[0].partitions[0]) == [b"a"]


def test_unknown_topic_id_from_v13(ctx):
    import uuid
    request = ctx.fetch_request("t", 0, 0, version=13)
    request.topics[0].topic_id = uuid.uuid4()
    data = ctx.respond(request, 13).responses[0].partitions[0]
    assert data.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_sessionless_fetch_gets_session_id_zero(ctx):
    request = ctx.fetch_request("t", 0, 0)
    assert request.session_epoch == -1
    assert ctx.respond(request, 12).session_id == 0


def test_corrupt_batch_is_refused_and_nothing_is_appended(ctx):
    batch = bytearray(batch_of(["a"]))
    batch[-1] ^= 0xFF
    out = ctx.produce("t", 0, bytes(batch)).response.responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.CORRUPT_MESSAGE
    assert ctx.node.topics.partition("t", 0).log_end_offset == 1


def test_batch_over_max_message_bytes_is_too_large(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("t", configs={"max.message.bytes": "1000"}).build()
    out = ctx.produce("t", 0, batch_of(["z" * 2000])).response.responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_idempotent_retry_is_acknowledged_without_a_second_append(ctx):
    batch = batch_of(["a", "b"], producer_id=7, producer_epoch=0, base_sequence=0)
    first = ctx.produce("t", 0, batch).response.responses[0].partition_responses[0]
    again = ctx.produce("t", 0, batch).response.responses[0].partition_responses[0]
    assert first.error_code == again.error_code == 0
    assert again.base_offset == first.base_offset
    assert ctx.node.topics.partition("t", 0).log_end_offset == 3


def test_a_retry_is_a_duplicate_after_the_log_start_passed_its_batch(ctx):
    """The producer never got the answer for its first batch and retries it (sequence 0, same
    epoch) after the log start moved past it: acknowledged at its first offset, not appended
    again (simulation seed 5484, where a snapshot moved the log start)."""
    from kraftd.protocol import messages as m
    batch = batch_of(["a"], producer_id=7, producer_epoch=0, base_sequence=0)
    first = ctx.produce("t", 0, batch).response.responses[0].partition_responses[0]
    ctx.produce_ok("t", 0, ["x", "y"])
    ctx.flush()
    Topic, Part = m.DeleteRecordsRequest.DeleteRecordsTopic, m.DeleteRecordsRequest.DeleteRecordsPartition
    deleted = ctx.respond(m.DeleteRecordsRequest(timeout_ms=1000, topics=[Topic(name="t", partitions=[
        Part(partition_index=0, offset=first.base_offset + 1)])]), 2).topics[0].partitions[0]
    assert (deleted.error_code, deleted.low_watermark) == (0, first.base_offset + 1)
    for _ in range(2):  # and after a restart
        end = ctx.node.topics.partition("t", 0).log_end_offset
        again = ctx.produce("t", 0, batch).response.responses[0].partition_responses[0]
        assert (again.error_code, again.base_offset) == (0, first.base_offset)
        assert ctx.node.topics.partition("t", 0).log_end_offset == end
        ctx = ctx.restart()


def test_sequence_gap_is_out_of_order(ctx):
    ctx.produce("t", 0, batch_of(["a"], producer_id=7, producer_epoch=0, base_sequence=0))
    out = ctx.produce("t", 0, batch_of(["c"], producer_id=7, producer_epoch=0, base_sequence=5))
    assert out.response.responses[0].partition_responses[0].error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_produce_auto_creates_unknown_topics(ctx):
    assert ctx.produce_ok("fresh", 0, ["a"]).base_offset == 1
    assert ctx.node.topics.get("fresh") is not None


def test_invalid_acks(ctx):
    out = ctx.produce("t", 0, batch_of(["a"]), acks=2).response.responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_log_append_time_topics_stamp_the_batch(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("t", configs={"message.timestamp.type": "LogAppendTime"}).build()
    out = ctx.produce_ok("t", 0, ["a"])
    assert out.log_append_time_ms == ctx.now_ms
