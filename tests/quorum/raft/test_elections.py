"""Elections, candidate side: Unattached -> Prospective (KIP-996 pre-vote) -> Candidate -> Leader."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.quorum.raft.election_state import ElectionState

from .raft_context import KEY, LEADER_CHANGE, RaftTestContext


def unattached(epoch: int = 4, voters=(1, 2, 3)) -> RaftTestContext:
    return RaftTestContext.builder(local_id=1, voters=voters).with_unknown_leader(epoch).append_to_log(3, 5).build()


def test_election_timeout_sends_pre_votes_for_the_next_epoch_without_bumping_it():
    ctx = unattached(epoch=4)
    writes = ctx.store.writes
    ctx.advance(ctx.election_timeout_ms - 1)
    assert ctx.sent(api.VOTE) == [], "stood before the (minimum) election timeout"
    ctx.advance(ctx.election_timeout_ms + 1)  # past the timeout plus its largest jitter
    ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True, to=(2, 3))
    ctx.assert_role("Prospective", 4)
    assert ctx.persisted_state() == ElectionState(4)
    assert ctx.store.writes == writes, "a pre-vote must not write the election state"


def test_pre_vote_majority_makes_a_candidate_whose_vote_is_durable_before_it_asks():
    ctx = unattached(epoch=4)
    ctx.advance(2 * ctx.election_timeout_ms)
    pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True)
    ctx.respond(pre_votes[0], ctx.vote_response(granted=True, epoch=4))

    out = ctx.take_outbox()  # what a shell sees first: the state to write, and no vote request
    assert out.persist == {KEY: ElectionState(5, voted_id=1)}
    assert [s for s in out.sends if s.api_key == api.VOTE] == []
    assert ctx.persisted_state() == ElectionState(4)
    assert [s for s in ctx.take_outbox().sends if s.api_key == api.VOTE] == [], "released before the write"
    ctx.persist(out.persist)

    ctx.assert_voted_for(5, 1)
    ctx.assert_role("Candidate", 5)
    ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False, to=(2, 3))


def test_vote_majority_makes_a_leader_that_writes_leader_change_at_its_epoch_start_and_announces_itself():
    ctx = unattached(epoch=4)
    ctx.advance(2 * ctx.election_timeout_ms)
    pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True)
    ctx.respond(pre_votes[1], ctx.vote_response(granted=True, epoch=4))
    votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False)
    assert ctx.sent(api.BEGIN_QUORUM_EPOCH) == []
    start = ctx.log.log_end_offset

    ctx.respond(votes[1], ctx.vote_response(granted=True, epoch=5))  # voter 3
    ctx.poll()

    ctx.assert_elected_leader(5, 1)
    assert ctx.control_type_at(start) == LEADER_CHANGE
    header, records = [(h, r) for h, r in ctx.batches() if h.base_offset == start][0]
    assert header.partition_leader_epoch == 5
    message, _ = m.LeaderChangeMessage.decode(memoryview(records[0].value), 0, 0)
    assert message.leader_id == 1
    assert sorted(v.voter_id for v in message.voters) == [1, 2, 3]
    assert sorted(v.voter_id for v in message.granting_voters) == [1, 3]
    assert tuple(ctx.log.epoch_cache.latest_entry) == (5, start)
    ctx.assert_sent_begin_quorum_epoch(5, to=(2, 3))


def test_a_minority_of_grants_wins_neither_the_pre_vote_nor_the_vote():
    ctx = unattached(epoch=4, voters=(1, 2, 3, 4, 5))
    ctx.advance(2 * ctx.election_timeout_ms)
    pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True, to=(2, 3, 4, 5))
    ctx.respond(pre_votes[0], ctx.vote_response(granted=True, epoch=4))
    ctx.assert_role("Prospective", 4)  # 2 of 5
    assert ctx.sent(api.VOTE) == []
    ctx.respond(pre_votes[1], ctx.vote_response(granted=True, epoch=4))
    votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False, to=(2, 3, 4, 5))
    ctx.respond(votes[0], ctx.vote_response(granted=True, epoch=5))
    ctx.respond(votes[1], ctx.vote_response(granted=False, epoch=5))
    ctx.assert_role("Candidate", 5)  # 2 of 5 granted
    assert ctx.sent(api.BEGIN_QUORUM_EPOCH) == []
    ctx.respond(votes[2], ctx.vote_response(granted=True, epoch=5))
    ctx.poll()
    ctx.assert_elected_leader(5, 1)


def test_pre_vote_rejected_by_a_majority_goes_back_without_an_epoch_bump():
    ctx = unattached(epoch=4)
    for _ in range(4):  # a flapping node keeps trying, and never moves the epoch
        ctx.advance(2 * ctx.election_timeout_ms)
        pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True)
        for s in pre_votes:
            ctx.respond(s, ctx.vote_response(granted=False, epoch=4))
        ctx.poll()
        ctx.assert_role("Unattached", 4)
        assert ctx.sent(api.VOTE) == []
        assert ctx.persisted_state() == ElectionState(4)


def test_rejected_pre_vote_keeps_the_vote_cast_in_this_epoch():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_voted_candidate(4, 3).build()
    ctx.advance(2 * ctx.election_timeout_ms)
    for s in ctx.assert_sent_vote_request(epoch=5, last_epoch=0, last_offset=0, pre_vote=True):
        ctx.respond(s, ctx.vote_response(granted=False, epoch=4))
    ctx.poll()
    ctx.assert_role("Voted", 4)
    ctx.assert_voted_for(4, 3)


def test_a_pre_vote_answer_naming_a_leader_of_the_epoch_makes_a_follower():
    ctx = unattached(epoch=4)
    ctx.advance(2 * ctx.election_timeout_ms)
    pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True)
    ctx.respond(pre_votes[0], ctx.vote_response(granted=False, epoch=4, leader_id=3))
    ctx.poll()
    ctx.assert_elected_leader(4, 3)
    ctx.assert_sent_fetch(offset=5, last_fetched_epoch=3, to=3)


def test_a_candidate_that_cannot_win_backs_off_and_stands_again_at_a_higher_epoch():
    ctx = unattached(epoch=4)
    ctx.advance(2 * ctx.election_timeout_ms)
    for s in ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True):
        ctx.respond(s, ctx.vote_response(granted=True, epoch=4))
    for s in ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False):
        ctx.respond(s, ctx.vote_response(granted=False, epoch=5))
    ctx.poll()
    ctx.assert_role("Voted", 5)  # lost, but keeps its own vote of epoch 5
    ctx.assert_voted_for(5, 1)
    ctx.advance(2 * ctx.election_timeout_ms)
    ctx.assert_sent_vote_request(epoch=6, last_epoch=3, last_offset=5, pre_vote=True)


def test_followers_of_a_dead_leader_timing_out_together_still_elect_one_of_them():
    """Found on real processes: both followers of a killed leader time out within a
    millisecond; each one's pre-vote reaches the other while it is still a follower. The
    refusal names the dead leader, which the prospective already knew: it must not go back to
    following it (that restarted its fetch timer, forever), and a follower that has not
    fetched since it began following grants the pre-vote."""
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(4, 3).append_to_log(3, 5).build()
    ctx.advance(ctx.fetch_timeout_ms)
    pre_votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True)
    to_2 = [s for s in pre_votes if s.destination == 2][0]
    ctx.respond(to_2, ctx.vote_response(granted=False, epoch=4, leader_id=3))  # 2 has not timed out yet
    ctx.poll()
    ctx.assert_role("Prospective", 4)
    # Node 2 times out in turn; its pre-vote reaches us: we grant (no fetch since the timeout).
    granted = ctx.deliver_vote_request(epoch=5, candidate_id=2, last_epoch=3, last_offset=5, pre_vote=True)
    assert granted.vote_granted


def test_a_candidate_refused_by_one_voter_and_unable_to_reach_the_other_backs_off_at_once():
    """A split vote after a leader's node died: the other candidate refuses, the dead node
    cannot be reached; waiting out the election timeout (1-2 s) only delays the next try."""
    ctx = unattached(epoch=4)
    ctx.advance(2 * ctx.election_timeout_ms)
    for s in ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True):
        ctx.respond(s, ctx.vote_response(granted=True, epoch=4))
    votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False)
    ctx.assert_role("Candidate", 5)
    to_2 = [s for s in votes if s.destination == 2][0]
    ctx.respond(to_2, ctx.vote_response(granted=False, epoch=5))
    ctx.node.on_unreachable(3, ctx.now_ms)
    ctx.poll()
    assert ctx.role in ("Unattached", "Voted") and ctx.epoch == 5


def test_after_a_split_vote_a_candidate_stands_again_within_the_retry_backoff_and_its_jitter():
    """The first of the two split candidates to stand again wins: the wait is the retry backoff
    plus jitter (capped by election_backoff_max_ms), not half an election timeout more."""
    for seed in range(20):
        ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_seed(seed).with_unknown_leader(4) \
            .append_to_log(3, 5).build()
        ctx.advance(2 * ctx.election_timeout_ms)
        for s in ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=True):
            ctx.respond(s, ctx.vote_response(granted=True, epoch=4))
        votes = ctx.assert_sent_vote_request(epoch=5, last_epoch=3, last_offset=5, pre_vote=False)
        for s in votes:
            ctx.respond(s, ctx.vote_response(granted=False, epoch=5))
        ctx.poll()
        assert ctx.role in ("Unattached", "Voted") and ctx.epoch == 5
        ctx.clear_sent()
        ctx.advance(ctx.raft.retry_backoff_ms - 1)
        assert not ctx.sent(api.VOTE), f"seed {seed}: stood again before the retry backoff"
        ctx.advance(ctx.raft.election_backoff_max_ms + 1)
        ctx.assert_sent_vote_request(epoch=6, last_epoch=3, last_offset=5, pre_vote=True)
