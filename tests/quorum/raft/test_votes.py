"""Elections, voter side: who gets a (pre-)vote, and that a vote is durable before it is answered."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.quorum.outcomes import Park, Respond
from kraftd.quorum.raft.election_state import ElectionState

from .raft_context import KEY, RaftTestContext


def builder():
    return RaftTestContext.builder(local_id=1, voters=(1, 2, 3))


def test_a_follower_that_fetched_from_its_leader_within_the_fetch_timeout_rejects_pre_votes():
    ctx = builder().with_elected_leader(5, 2).append_to_log(3, 4).build()
    fetch = ctx.assert_sent_fetch(offset=4, last_fetched_epoch=3)
    ctx.respond(fetch, ctx.fetch_response(high_watermark=4))
    ctx.advance(ctx.fetch_timeout_ms - 1)
    answer = ctx.deliver_vote_request(6, 3, last_epoch=5, last_offset=100, pre_vote=True)
    assert not answer.vote_granted
    assert (answer.leader_id, answer.leader_epoch) == (2, 5)
    ctx.assert_elected_leader(5, 2)


def test_a_follower_that_never_heard_from_its_leader_grants_pre_votes():
    ctx = builder().with_elected_leader(5, 2).append_to_log(3, 4).build()
    assert ctx.deliver_vote_request(6, 3, last_epoch=3, last_offset=4, pre_vote=True).vote_granted
    ctx.assert_elected_leader(5, 2)  # a pre-vote changes nothing


def test_an_unattached_voter_grants_a_pre_vote_only_to_a_log_at_least_as_long_and_changes_nothing():
    ctx = builder().with_unknown_leader(5).append_to_log(3, 10).build()
    writes = ctx.store.writes
    assert not ctx.deliver_vote_request(6, 2, last_epoch=3, last_offset=9, pre_vote=True).vote_granted
    assert not ctx.deliver_vote_request(6, 2, last_epoch=2, last_offset=50, pre_vote=True).vote_granted
    assert ctx.deliver_vote_request(6, 2, last_epoch=3, last_offset=10, pre_vote=True).vote_granted
    assert ctx.deliver_vote_request(6, 3, last_epoch=4, last_offset=1, pre_vote=True).vote_granted
    ctx.assert_role("Unattached", 5)
    assert ctx.persisted_state() == ElectionState(5)
    assert ctx.store.writes == writes


def test_a_vote_is_refused_to_a_candidate_whose_last_epoch_and_end_offset_are_behind_ours():
    ctx = builder().with_unknown_leader(5).append_to_log(2, 4).append_to_log(3, 6).build()
    assert ctx.last_log_id() == (3, 10)
    assert not ctx.deliver_vote_request(6, 2, last_epoch=2, last_offset=50).vote_granted  # older last epoch
    assert not ctx.deliver_vote_request(6, 2, last_epoch=3, last_offset=9).vote_granted  # shorter
    ctx.assert_unknown_leader(6)  # the higher epoch is taken, the vote is not cast
    assert ctx.persisted_state().voted_id == -1
    assert ctx.deliver_vote_request(6, 3, last_epoch=3, last_offset=10).vote_granted
    ctx.assert_voted_for(6, 3)
    ctx.assert_role("Voted", 6)


def test_one_vote_per_epoch_and_a_repeated_request_gets_the_same_answer():
    ctx = builder().with_unknown_leader(5).build()
    assert ctx.deliver_vote_request(6, 2, last_epoch=0, last_offset=0).vote_granted
    assert not ctx.deliver_vote_request(6, 3, last_epoch=9, last_offset=99).vote_granted
    assert ctx.deliver_vote_request(6, 2, last_epoch=0, last_offset=0).vote_granted  # a resent request
    ctx.assert_voted_for(6, 2)


def test_a_vote_for_an_older_epoch_is_fenced():
    ctx = builder().with_unknown_leader(5).build()
    answer = ctx.deliver_vote_request(4, 2, last_epoch=9, last_offset=99)
    assert not answer.vote_granted and answer.error_code == 74  # FENCED_LEADER_EPOCH
    assert answer.leader_epoch == 5
    assert ctx.persisted_state() == ElectionState(5)


def test_a_granted_vote_is_durable_before_the_answer_is_released():
    ctx = builder().with_unknown_leader(5).build()
    outcome = ctx.handle(ctx.vote_request(6, 2, last_epoch=0, last_offset=0), api.VOTE, 2, source=2)
    assert isinstance(outcome, Park), "a vote must not be answered before it is written"

    out = ctx.take_outbox()
    assert out.persist == {KEY: ElectionState(6, voted_id=2)}
    assert out.completions == [] and outcome.token not in ctx.completions
    assert ctx.persisted_state() == ElectionState(5)
    ctx.take_outbox()  # asking again before the write completes releases nothing
    assert outcome.token not in ctx.completions

    ctx.persist(out.persist)
    assert ctx.persisted_state() == ElectionState(6, voted_id=2)
    ctx.take_outbox()
    answer = ctx.completions.pop(outcome.token).topics[0].partitions[0]
    assert answer.vote_granted and answer.leader_epoch == 6


def test_a_refusal_that_changes_nothing_is_answered_at_once():
    ctx = builder().with_voted_candidate(6, 3).build()
    outcome = ctx.handle(ctx.vote_request(6, 2, last_epoch=0, last_offset=0), api.VOTE, 2, source=2)
    assert isinstance(outcome, Respond)
    assert not outcome.response.topics[0].partitions[0].vote_granted
