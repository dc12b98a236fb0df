"""The disk-loss rule: a replica restarted on an empty disk may have voted in an epoch it no
longer remembers, so it neither votes nor stands until it has caught up with a leader once. A
new copy a move made (it may have voted in a copy it deleted) waits less: until it knows a
leader."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.quorum.raft.election_state import ElectionState

from .raft_context import RaftTestContext, data_batch


def rejoining() -> RaftTestContext:
    return RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).rejoining().build()


def test_a_rejoining_replica_starts_with_may_vote_false_on_disk():
    ctx = rejoining()
    assert ctx.persisted_state().may_vote is False


def test_a_rejoining_replica_grants_no_votes_and_no_pre_votes():
    ctx = rejoining()
    assert not ctx.deliver_vote_request(1, 2, last_epoch=9, last_offset=99, pre_vote=True).vote_granted
    assert not ctx.deliver_vote_request(1, 2, last_epoch=9, last_offset=99).vote_granted
    assert not ctx.deliver_vote_request(3, 3, last_epoch=9, last_offset=99).vote_granted
    state = ctx.persisted_state()
    assert (state.voted_id, state.may_vote) == (-1, False)


def test_a_rejoining_replica_does_not_stand_after_its_election_timeout():
    """It looks for the leader instead, by asking the voters in turn (the leader may no longer
    count this node's new directory among its voters, so no BeginQuorumEpoch may come)."""
    ctx = rejoining()
    for _ in range(5):
        ctx.advance(2 * ctx.election_timeout_ms)
    assert ctx.sent(api.VOTE) == []
    assert ctx.epoch == 0 and ctx.role in ("Unattached", "Follower")
    asked = {s.destination for s in ctx.sent(api.FETCH)}
    assert asked and asked <= set(ctx.others)


def test_a_rejoining_replica_follows_on_begin_quorum_epoch_and_votes_again_once_caught_up():
    ctx = rejoining()
    assert ctx.deliver_begin_quorum_epoch(4, leader_id=2).error_code == 0
    ctx.assert_elected_leader(4, 2)
    ctx.poll()

    # The leader has 0-4 (epoch 1) and its LeaderChange + a record (5-6, epoch 4); HW 7.
    fetch = ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1, epoch=4)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(1, range(5)), high_watermark=7))
    ctx.poll()
    assert ctx.log.log_end_offset == 5
    assert ctx.persisted_state().may_vote is False, "voting again before reaching the leader's HW"
    assert not ctx.deliver_vote_request(5, 3, last_epoch=4, last_offset=7).vote_granted

    fetch = ctx.assert_sent_fetch(offset=5, last_fetched_epoch=1)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(4, ["lc", "x"], base_offset=5), high_watermark=7))
    ctx.poll()
    assert ctx.log.log_end_offset == 7
    assert ctx.persisted_state().may_vote is True
    ctx.assert_elected_leader(4, 2)

    assert ctx.deliver_vote_request(5, 3, last_epoch=4, last_offset=7).vote_granted
    ctx.assert_voted_for(5, 3)
    assert ctx.persisted_state().may_vote is True


def test_a_caught_up_rejoiner_stands_again_when_its_leader_goes_silent():
    ctx = rejoining()
    ctx.deliver_begin_quorum_epoch(4, leader_id=2)
    ctx.poll()
    fetch = ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1, epoch=4)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(4, ["lc", "x"]), high_watermark=2))
    ctx.poll()
    assert ctx.persisted_state().may_vote is True
    ctx.clear_sent()
    ctx.advance(ctx.fetch_timeout_ms)
    ctx.assert_sent_vote_request(epoch=5, last_epoch=4, last_offset=2, pre_vote=True)


def test_a_rejoiner_that_has_not_caught_up_keeps_following_instead_of_standing():
    ctx = rejoining()
    ctx.deliver_begin_quorum_epoch(4, leader_id=2)
    ctx.poll()
    ctx.clear_sent()
    for _ in range(4):
        ctx.advance(ctx.fetch_timeout_ms)
    assert ctx.sent(api.VOTE) == []
    ctx.assert_elected_leader(4, 2)
    assert ctx.sent(api.FETCH, destination=2), "stopped fetching from its leader"


def joining() -> RaftTestContext:
    return RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).joining().build()


def test_a_new_copy_votes_again_once_it_knows_a_leader_without_waiting_for_its_hw():
    """Sim seed 8333: a leader added a moved copy as a voter and died before telling it an HW;
    the copy waited for one and the two other live voters could never make three of four."""
    ctx = joining()
    assert (ctx.persisted_state().may_vote, ctx.persisted_state().joining) == (False, True)
    assert not ctx.deliver_vote_request(3, 3, last_epoch=0, last_offset=0).vote_granted
    assert not ctx.deliver_vote_request(3, 3, last_epoch=0, last_offset=0, pre_vote=True).vote_granted

    assert ctx.deliver_begin_quorum_epoch(4, leader_id=2).error_code == 0
    ctx.poll()
    state = ctx.persisted_state()
    assert (state.epoch, state.leader_id, state.may_vote, state.joining) == (4, 2, True, False)
    assert ctx.log.log_end_offset == 0  # nothing fetched, no HW heard
    assert not ctx.deliver_vote_request(4, 3, last_epoch=0, last_offset=0).vote_granted  # epoch 4 has a leader
    assert ctx.deliver_vote_request(5, 3, last_epoch=0, last_offset=0).vote_granted
    ctx.assert_voted_for(5, 3)


def test_a_copy_that_lost_its_disk_keeps_waiting_for_the_hw_after_it_knows_a_leader():
    ctx = rejoining()
    ctx.deliver_begin_quorum_epoch(4, leader_id=2)
    ctx.poll()
    state = ctx.persisted_state()
    assert (state.leader_id, state.may_vote, state.joining) == (2, False, False)
    assert not ctx.deliver_vote_request(5, 3, last_epoch=0, last_offset=0).vote_granted


def test_the_joining_mark_survives_the_state_file():
    state = ElectionState(3, may_vote=False, joining=True)
    assert ElectionState.from_json(state.to_json()) == state
    assert ElectionState.from_json({"epoch": 3, "mayVote": False}).joining is False  # a file from before
