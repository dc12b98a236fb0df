"""Follower: fetching, divergence truncation, the HW safety net, EndQuorumEpoch, fetch timeout."""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.quorum.raft.group import SafetyViolation

from .raft_context import RaftTestContext, data_batch


def follower(epoch: int = 5, leader: int = 2):
    """Local 1 follows `leader`; its log: offsets 0-4 of epoch 1, 5-9 of epoch 2, a batch each."""
    return (RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(epoch, leader)
            .append_to_log(1, 5, per_batch=1).append_to_log(2, 5, per_batch=1).build())


def test_a_follower_fetches_from_its_log_end_and_appends_what_the_leader_sends():
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2, epoch=5, to=2)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(5, ["a", "b", "c"], base_offset=10), high_watermark=12))
    ctx.poll()
    assert ctx.log.log_end_offset == 13
    assert ctx.partition.high_watermark == 12  # min(leader's HW, our log end)
    ctx.assert_sent_fetch(offset=13, last_fetched_epoch=5)


def test_diverging_epoch_truncates_to_where_the_logs_agree():
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(diverging_epoch=(1, 3), high_watermark=0))
    ctx.poll()
    assert ctx.log.log_end_offset == 3
    assert ctx.log.epoch_cache.latest_epoch == 1
    ctx.assert_sent_fetch(offset=3, last_fetched_epoch=1)


def test_diverging_epoch_ending_past_our_entries_of_that_epoch_truncates_to_our_end_of_it():
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(diverging_epoch=(1, 8), high_watermark=0))
    ctx.poll()
    assert ctx.log.log_end_offset == 5  # our epoch 1 ends at 5: offsets 5-7 of ours are epoch 2
    ctx.assert_sent_fetch(offset=5, last_fetched_epoch=1)


def test_a_diverging_epoch_below_the_high_watermark_is_a_safety_violation():
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(high_watermark=8))
    ctx.poll()
    assert ctx.partition.high_watermark == 8
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    with pytest.raises(SafetyViolation):
        ctx.respond(fetch, ctx.fetch_response(diverging_epoch=(1, 3), high_watermark=8))
    assert ctx.log.log_end_offset == 10, "committed entries were truncated"


def test_a_follower_whose_leader_goes_silent_stands_after_the_fetch_timeout():
    ctx = follower()
    ctx.clear_sent()
    ctx.advance(ctx.fetch_timeout_ms - 1)
    assert ctx.sent(api.VOTE) == []
    ctx.advance(1)
    ctx.assert_sent_vote_request(epoch=6, last_epoch=2, last_offset=10, pre_vote=True, to=(2, 3))
    assert ctx.persisted_state().epoch == 5


def test_a_follower_that_hears_from_its_leader_does_not_stand():
    ctx = follower()
    for _ in range(6):
        fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
        ctx.advance(ctx.fetch_timeout_ms // 2)
        ctx.respond(fetch, ctx.fetch_response(high_watermark=0))
        ctx.poll()
    assert ctx.sent(api.VOTE) == []
    ctx.assert_elected_leader(5, 2)


def test_a_fetch_answer_naming_a_newer_leader_moves_the_follower_there():
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(error=74, leader=(3, 7), high_watermark=-1))  # FENCED_LEADER_EPOCH
    ctx.poll()
    ctx.assert_elected_leader(7, 3)
    ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2, epoch=7, to=3)


def _ms_until_pre_vote_after_end_quorum_epoch(successors) -> int:
    ctx = follower()
    ctx.clear_sent()
    assert ctx.deliver_end_quorum_epoch(5, leader_id=2, successors=successors).error_code == 0
    ctx.assert_unknown_leader(5)
    assert ctx.persisted_state().leader_id == -1
    waited = ctx.ms_until_sent(api.VOTE, 3 * ctx.election_timeout_ms)
    assert waited is not None, "never stood after its leader resigned"
    ctx.assert_sent_vote_request(epoch=6, last_epoch=2, last_offset=10, pre_vote=True)
    return waited


def test_end_quorum_epoch_the_first_preferred_successor_stands_first():
    first = _ms_until_pre_vote_after_end_quorum_epoch([1, 3])
    second = _ms_until_pre_vote_after_end_quorum_epoch([3, 1])
    unnamed = _ms_until_pre_vote_after_end_quorum_epoch([3])
    assert first < second < unnamed
    assert first < RaftTestContext.builder().build().election_timeout_ms // 4, "not sooner than a normal timeout"


def test_end_quorum_epoch_from_someone_else_or_an_old_epoch_changes_nothing():
    ctx = follower()
    assert ctx.deliver_end_quorum_epoch(5, leader_id=3, successors=[1]).error_code == 0
    ctx.assert_elected_leader(5, 2)
    assert ctx.deliver_end_quorum_epoch(4, leader_id=2, successors=[1]).error_code == 74
    ctx.assert_elected_leader(5, 2)


def test_a_follower_whose_leader_refuses_connections_stands_after_the_grace_not_the_fetch_timeout():
    """Within twice the grace (it is jittered so the followers do not split the vote), far
    sooner than the 2 s fetch timeout."""
    from kraftd.protocol import api as _api
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(4, 3).append_to_log(4, 5).build()
    ctx.advance(10)
    ctx.node.on_unreachable(3, ctx.now_ms)  # the leader's node was killed: connection refused
    ctx.advance(2 * ctx.node.replication.config.unreachable_grace_ms)  # the grace plus at most as much jitter
    assert ctx.role == "Prospective"
    assert ctx.sent(_api.VOTE)


def test_an_answer_from_the_leader_cancels_the_unreachable_verdict():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(4, 3).append_to_log(4, 5).build()
    ctx.advance(10)
    fetch = ctx.assert_sent_fetch(offset=5, last_fetched_epoch=4)
    ctx.node.on_unreachable(3, ctx.now_ms)  # a reset connection, then the leader answers again
    ctx.clear_sent()
    ctx.advance(50)
    retry = ctx.assert_sent_fetch(offset=5, last_fetched_epoch=4)
    ctx.respond(retry, ctx.fetch_response(high_watermark=5))
    ctx.advance(ctx.node.replication.config.unreachable_grace_ms)
    assert ctx.role == "Follower"


def test_a_follower_that_heard_of_the_resignation_first_still_stands_in_its_successor_turn():
    # Found on real processes (the failover bench): the resigned leader's answer to a fetch
    # reached the preferred successor before its EndQuorumEpoch, so the successor was no longer
    # a follower when that came, ignored its place, and waited out a full election timeout. The
    # second successor stood first, and the hand-over to the preferred replica failed each time.
    ctx = follower()
    fetch = ctx.assert_sent_fetch(offset=10, last_fetched_epoch=2)
    ctx.respond(fetch, ctx.fetch_response(error=6, leader=(-1, 5), high_watermark=-1))  # NOT_LEADER_OR_FOLLOWER
    ctx.poll()
    ctx.assert_unknown_leader(5)
    ctx.clear_sent()
    assert ctx.deliver_end_quorum_epoch(5, leader_id=2, successors=[1, 3]).error_code == 0
    waited = ctx.ms_until_sent(api.VOTE, 3 * ctx.election_timeout_ms)
    assert waited is not None and waited < ctx.election_timeout_ms // 4, waited
