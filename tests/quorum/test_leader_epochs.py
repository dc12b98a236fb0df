"""KIP-320 (and KIP-595's LastFetchedEpoch) rules not covered by test_epochs_and_offsets.py:
-1 skips, precedence of the epoch check, CurrentLeader on both errors, epochs across a
DeleteRecords that cuts an epoch, OffsetForLeaderEpoch below the earliest epoch."""
import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .node_context import START_MS, NodeTestContext, batch_of, values_in
from .test_epochs_and_offsets import end_offset_for, list_offsets

NO_DIVERGENCE = m.FetchResponse.EpochEndOffset()


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_topic("t").build()


@pytest.fixture
def two_epochs(ctx):
    """Epoch e1: LeaderChange at 0, "a" "b" at 1-2. Epoch e2: LeaderChange at 3, "c" at 4."""
    e1 = ctx.node.leader_epoch
    ctx.produce("t", 0, batch_of(["a", "b"], timestamp=START_MS + 500))
    ctx.flush()
    ctx = ctx.restart()
    ctx.produce("t", 0, batch_of(["c"], timestamp=START_MS + 100))
    ctx.flush()
    assert ctx.node.leader_epoch == e1 + 1
    return ctx, e1, e1 + 1


def delete_records(ctx, offset):
    request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name="t", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=offset)])])
    out = ctx.respond(request, 2).topics[0].partitions[0]
    assert out.error_code == 0 and out.low_watermark == offset


# -- CurrentLeaderEpoch --------------------------------------------------------------------

def test_minus_one_skips_the_epoch_check_everywhere(two_epochs):
    ctx, e1, e2 = two_epochs
    assert ctx.fetch("t", 0, 4, current_leader_epoch=-1).error_code == 0
    assert list_offsets(ctx, -1, current_leader_epoch=-1).error_code == 0
    assert end_offset_for(ctx, e1, current_leader_epoch=-1).error_code == 0
    # and the current epoch passes too
    assert ctx.fetch("t", 0, 4, current_leader_epoch=e2).error_code == 0
    assert list_offsets(ctx, -1, current_leader_epoch=e2).error_code == 0
    assert end_offset_for(ctx, e1, current_leader_epoch=e2).error_code == 0


@pytest.mark.parametrize("delta, code", [(-1, ErrorCode.FENCED_LEADER_EPOCH), (1, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_both_epoch_errors_carry_the_current_leader_in_fetch(ctx, delta, code):
    epoch = ctx.node.leader_epoch
    data = ctx.fetch("t", 0, 0, current_leader_epoch=epoch + delta)
    assert data.error_code == code
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (ctx.config.node_id, epoch)
    assert (data.high_watermark, data.log_start_offset, values_in(data)) == (-1, -1, [])


@pytest.mark.parametrize("delta, code", [(-1, ErrorCode.FENCED_LEADER_EPOCH), (1, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_the_epoch_check_comes_before_any_other_partition_check(ctx, delta, code):
    epoch = ctx.node.leader_epoch
    # Out of range, negative, or an impossible last fetched epoch: the epoch is still judged first.
    assert ctx.fetch("t", 0, 99, current_leader_epoch=epoch + delta).error_code == code
    assert ctx.fetch("t", 0, -5, current_leader_epoch=epoch + delta).error_code == code
    assert ctx.fetch("t", 0, 0, current_leader_epoch=epoch + delta,
                     last_fetched_epoch=epoch + 5).error_code == code


def test_offset_for_leader_epoch_unknown_leader_epoch(ctx):
    epoch = ctx.node.leader_epoch
    out = end_offset_for(ctx, epoch, current_leader_epoch=epoch + 1)
    assert (out.error_code, out.leader_epoch, out.end_offset) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)


def test_list_offsets_errors_carry_no_offset_or_epoch(ctx):
    epoch = ctx.node.leader_epoch
    for current, code in ((epoch - 1, ErrorCode.FENCED_LEADER_EPOCH), (epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        out = list_offsets(ctx, -2, current_leader_epoch=current)
        assert (out.error_code, out.offset, out.leader_epoch) == (code, -1, -1)


# -- Fetch: LastFetchedEpoch (v12+) and request validation -------------------------------------

def test_a_last_fetched_epoch_on_our_log_reads_normally(two_epochs):
    ctx, e1, e2 = two_epochs
    # The fetcher ended epoch e1 at offset 3, exactly where our e1 ends: no divergence.
    data = ctx.fetch("t", 0, 3, last_fetched_epoch=e1, current_leader_epoch=e2)
    assert data.error_code == 0 and data.diverging_epoch == NO_DIVERGENCE
    assert values_in(data) == [b"c"]
    assert ctx.fetch("t", 0, 5, last_fetched_epoch=e2).diverging_epoch == NO_DIVERGENCE


def test_a_fetch_offset_past_the_end_of_its_epoch_diverges(two_epochs):
    ctx, e1, e2 = two_epochs
    data = ctx.fetch("t", 0, 4, last_fetched_epoch=e1)
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (e1, 3)
    assert values_in(data) == [] and data.high_watermark == 5


def test_below_v12_last_fetched_epoch_is_not_checked(two_epochs):
    ctx, e1, _ = two_epochs
    data = ctx.fetch("t", 0, 4, version=11, last_fetched_epoch=e1)
    assert data.diverging_epoch == NO_DIVERGENCE and values_in(data) == [b"c"]


def test_negative_fetch_offset_is_an_invalid_request(ctx):
    assert ctx.fetch("t", 0, -1).error_code == ErrorCode.INVALID_REQUEST


def test_negative_max_wait_is_a_top_level_invalid_request(ctx):
    response = ctx.respond(ctx.fetch_request("t", 0, 0, max_wait_ms=-1), 12)
    assert (response.error_code, response.responses) == (ErrorCode.INVALID_REQUEST, [])


# -- epochs after DeleteRecords cut into the history ----------------------------------------------

def test_list_offsets_earliest_carries_the_epoch_covering_the_log_start(two_epochs):
    ctx, e1, e2 = two_epochs
    assert (list_offsets(ctx, -2).offset, list_offsets(ctx, -2).leader_epoch) == (0, e1)
    delete_records(ctx, 2)  # still inside e1
    assert (list_offsets(ctx, -2).offset, list_offsets(ctx, -2).leader_epoch) == (2, e1)
    delete_records(ctx, 4)  # past the e1/e2 boundary at 3
    earliest = list_offsets(ctx, -2)
    assert (earliest.offset, earliest.leader_epoch) == (4, e2)
    latest = list_offsets(ctx, -1)
    assert (latest.offset, latest.leader_epoch) == (5, e2)


def test_list_offsets_max_timestamp_carries_the_epoch_of_its_batch(two_epochs):
    ctx, e1, e2 = two_epochs
    top = list_offsets(ctx, -3)  # "a", "b" at START+500 were written in e1; e2 only wrote START+100
    assert (top.offset, top.timestamp, top.leader_epoch) == (1, START_MS + 500, e1)  # the first of the tie
    ctx.produce("t", 0, batch_of(["d"], timestamp=START_MS + 900))
    # Not yet below the HW: like Kafka (the answer is filtered by the last fetchable offset), none.
    assert (list_offsets(ctx, -3).offset, list_offsets(ctx, -3).leader_epoch) == (-1, -1)
    ctx.flush()
    top = list_offsets(ctx, -3)
    assert (top.offset, top.timestamp, top.leader_epoch) == (5, START_MS + 900, e2)
    by_time = list_offsets(ctx, START_MS + 200)
    assert (by_time.offset, by_time.leader_epoch) == (1, e1)


def test_offset_for_leader_epoch_below_the_earliest_epoch_answers_the_log_start(two_epochs):
    ctx, e1, e2 = two_epochs
    assert (r := end_offset_for(ctx, e1)) and (r.leader_epoch, r.end_offset) == (e1, 3)
    delete_records(ctx, 4)  # the epoch cache now starts with (e2, 4)
    for requested in (e1, e1 - 1 if e1 > 0 else 0):
        out = end_offset_for(ctx, requested)
        assert (out.error_code, out.leader_epoch, out.end_offset) == (0, requested, 4)
    out = end_offset_for(ctx, e2)
    assert (out.leader_epoch, out.end_offset) == (e2, 5)
    out = end_offset_for(ctx, -1)
    assert (out.error_code, out.leader_epoch, out.end_offset) == (0, -1, -1)


def test_a_fetcher_whose_epoch_was_deleted_is_sent_back_to_the_log_start(two_epochs):
    ctx, e1, e2 = two_epochs
    delete_records(ctx, 4)
    data = ctx.fetch("t", 0, 5, last_fetched_epoch=e1)
    assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (e1, 4)
    assert data.log_start_offset == 4 and values_in(data) == []


def test_metadata_leader_epoch_follows_restarts(two_epochs):
    ctx, _, e2 = two_epochs

    def metadata_epoch(c):
        response = c.respond(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t")],
                                               allow_auto_topic_creation=False), 12)
        return response.topics[0].partitions[0].leader_epoch

    assert metadata_epoch(ctx) == e2
    ctx = ctx.restart()
    assert metadata_epoch(ctx) == e2 + 1 == ctx.node.leader_epoch
    assert ctx.fetch("t", 0, 0, current_leader_epoch=e2).error_code == ErrorCode.FENCED_LEADER_EPOCH
