"""Leader: stepping down on a higher epoch, check-quorum resignation, the high watermark."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .raft_context import RaftTestContext


def leader(voters=(1, 2, 3)) -> tuple[RaftTestContext, int]:
    ctx = RaftTestContext.builder(local_id=1, voters=voters).with_unknown_leader(4).append_to_log(3, 5).build()
    epoch = ctx.win_election()
    ctx.clear_sent()
    return ctx, epoch


def test_a_higher_epoch_vote_request_makes_the_leader_step_down():
    ctx, epoch = leader()
    last_epoch, last_offset = ctx.last_log_id()
    assert not ctx.deliver_vote_request(epoch, 2, last_epoch, last_offset).vote_granted  # same epoch: no
    ctx.assert_elected_leader(epoch, 1)

    answer = ctx.deliver_vote_request(epoch + 1, 2, last_epoch, last_offset)
    assert answer.vote_granted
    ctx.assert_role("Voted", epoch + 1)
    ctx.assert_voted_for(epoch + 1, 2)
    assert not ctx.partition.is_leader


def test_a_higher_epoch_pre_vote_does_not_unseat_the_leader():
    ctx, epoch = leader()
    last_epoch, last_offset = ctx.last_log_id()
    assert not ctx.deliver_vote_request(epoch + 1, 2, last_epoch, last_offset + 10, pre_vote=True).vote_granted
    ctx.assert_elected_leader(epoch, 1)


def test_a_higher_epoch_begin_quorum_epoch_makes_the_leader_a_follower_of_the_new_leader():
    ctx, epoch = leader()
    answer = ctx.deliver_begin_quorum_epoch(epoch + 2, leader_id=3)
    assert answer.error_code == 0
    ctx.assert_elected_leader(epoch + 2, 3)
    ctx.poll()
    last_epoch, end = ctx.last_log_id()
    ctx.assert_sent_fetch(offset=end, last_fetched_epoch=last_epoch, to=3)


def test_a_response_carrying_a_higher_epoch_makes_the_leader_step_down():
    ctx, epoch = leader()
    ctx.advance(ctx.raft.retry_backoff_ms)  # BeginQuorumEpoch is resent to voters that did not answer
    begins = ctx.sent(api.BEGIN_QUORUM_EPOCH, destination=2)
    assert begins
    ctx.respond(begins[0], ctx.epoch_response(m.BeginQuorumEpochResponse, epoch + 3, leader_id=3))
    ctx.poll()
    ctx.assert_elected_leader(epoch + 3, 3)


def test_a_voter_that_does_not_know_the_partition_yet_hears_begin_quorum_epoch_again_soon():
    """Its answer UNKNOWN_TOPIC_OR_PARTITION (it has not replayed the topic's creation): the
    leader asks again after the retry backoff, not after a request timeout. (On real processes
    the voter otherwise found the leader by its own election timeout, ~2 s later, and dropped
    out of the ISR meanwhile under a short replica_lag_time_max_ms.)"""
    ctx, epoch = leader()
    ctx.advance(ctx.raft.retry_backoff_ms)
    for voter in (2, 3):
        begins = ctx.sent(api.BEGIN_QUORUM_EPOCH, destination=voter)
        assert begins
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if voter == 3 else 0
        ctx.respond(begins[-1], ctx.epoch_response(m.BeginQuorumEpochResponse, epoch, leader_id=1, error=error))
    ctx.clear_sent()
    ctx.advance(ctx.raft.retry_backoff_ms)
    assert ctx.sent(api.BEGIN_QUORUM_EPOCH, destination=3)


def test_check_quorum_a_leader_no_majority_fetched_from_within_one_and_a_half_fetch_timeouts_resigns():
    ctx, epoch = leader()
    window = ctx.fetch_timeout_ms * 3 // 2
    ctx.advance(window - 1)
    ctx.assert_elected_leader(epoch, 1)
    assert ctx.sent(api.END_QUORUM_EPOCH) == []

    ctx.advance(1)
    ctx.assert_resigned(epoch)
    assert not ctx.partition.is_leader
    ctx.assert_sent_end_quorum_epoch(epoch, to=(2, 3))
    state = ctx.persisted_state()  # resigning changes nothing durable
    assert (state.epoch, state.leader_id) == (epoch, 1)


def test_check_quorum_a_leader_fetched_from_by_a_majority_stays():
    ctx, epoch = leader()
    for _ in range(12):  # 12 x fetch_timeout/2: four check-quorum windows
        ctx.advance(ctx.fetch_timeout_ms // 2)
        ctx.deliver_fetch(2, ctx.log.log_end_offset, ctx.last_log_id()[0])
    ctx.poll()
    ctx.assert_elected_leader(epoch, 1)
    assert ctx.sent(api.END_QUORUM_EPOCH) == []


def test_check_quorum_one_follower_of_four_is_not_a_majority():
    ctx, epoch = leader(voters=(1, 2, 3, 4, 5))
    for _ in range(3):  # fetches from 2 alone, every fetch_timeout/2, for 1.5 fetch timeouts
        ctx.advance(ctx.fetch_timeout_ms // 2)
        ctx.deliver_fetch(2, ctx.log.log_end_offset, ctx.last_log_id()[0])
    ctx.assert_resigned(epoch)
    ctx.assert_sent_end_quorum_epoch(epoch, to=(2, 3, 4, 5))


def test_resigned_leader_names_the_most_caught_up_voter_first_and_stands_again_later():
    ctx, epoch = leader()
    ctx.deliver_fetch(3, ctx.log.log_end_offset, ctx.last_log_id()[0])  # 3 caught up, 2 never fetched
    ctx.advance(ctx.fetch_timeout_ms * 3)
    ctx.assert_resigned(epoch)
    for s in ctx.assert_sent_end_quorum_epoch(epoch):
        [p] = ctx.fetch_partitions(s)
        assert [c.candidate_id for c in p.preferred_candidates] == [3, 2]
    ctx.advance(2 * ctx.election_timeout_ms)
    last_epoch, end = ctx.last_log_id()
    ctx.assert_sent_vote_request(epoch + 1, last_epoch, end, pre_vote=True)


def test_a_resigned_leader_names_no_leader_in_its_answers():
    # Naming itself, its answer to the successor's pre-vote made that successor follow it again
    # instead of standing (seen on real processes: hand-overs to a preferred replica failed).
    ctx, epoch = leader()
    ctx.deliver_fetch(3, ctx.log.log_end_offset, ctx.last_log_id()[0])
    ctx.advance(ctx.fetch_timeout_ms * 3)
    ctx.assert_resigned(epoch)
    last_epoch, last_offset = ctx.last_log_id()
    answer = ctx.deliver_vote_request(epoch + 1, 3, last_epoch, last_offset, pre_vote=True)
    assert (answer.leader_id, answer.leader_epoch) == (-1, epoch)
    assert ctx.partition.leader_id == -1  # what Fetch and Metadata answers name too


def test_the_high_watermark_moves_with_a_majority_and_only_past_the_epoch_start():
    ctx, epoch = leader()
    start = ctx.log.log_end_offset - 1  # the LeaderChange batch
    assert ctx.partition.high_watermark == 0
    ctx.deliver_fetch(2, start, 3)  # has the old epoch's records only
    assert ctx.partition.high_watermark == 0, "an older epoch's entries commit only through this epoch's"
    ctx.deliver_fetch(2, start + 1, epoch)
    assert ctx.partition.high_watermark == start + 1


def test_a_leader_restarted_from_its_durable_state_stands_again_instead_of_leading():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(5, 1).append_to_log(5, 3).build()
    assert not ctx.partition.is_leader
    assert ctx.sent(api.BEGIN_QUORUM_EPOCH) == []
    ctx.assert_sent_vote_request(epoch=6, last_epoch=5, last_offset=3, pre_vote=True)  # at once
    ctx.assert_role("Prospective", 5)
