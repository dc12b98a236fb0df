"""Observers: a node that is not a voter of a group (a broker outside the metadata quorum)
never stands, and finds the leader by fetching from the voters in turn."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol.errors import ErrorCode

from .raft_context import RaftTestContext


def observer() -> RaftTestContext:
    return RaftTestContext.builder(local_id=4, voters=(1, 2, 3)).with_unknown_leader(0).build()


def observer_following_3() -> RaftTestContext:
    """An observer whose probe was told that voter 3 leads epoch 5, and follows it."""
    ctx = observer()
    ctx.advance(ctx.election_timeout_ms)
    probe = ctx.sent(api.FETCH)[-1]
    ctx.respond(probe, ctx.fetch_response(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, leader=(3, 5)))
    ctx.poll()
    ctx.assert_role("Follower", 5)
    return ctx


def test_an_observer_never_stands_and_asks_the_voters_for_the_leader():
    ctx = observer()
    ctx.advance(10 * ctx.election_timeout_ms)
    assert ctx.sent(api.VOTE) == []
    probe = ctx.sent(api.FETCH)[-1]
    assert probe.destination in (1, 2, 3)
    # A voter that does not lead names the leader it follows: the observer follows that one.
    _assert_follows_the_leader_it_is_told_of(ctx, probe, 3, 5)


def test_an_observer_whose_leader_went_silent_looks_again_instead_of_waiting_forever():
    ctx = observer_following_3()
    ctx.clear_sent()
    for _ in range(2 * ctx.fetch_timeout_ms // 100):  # leader 3 never answers
        ctx.advance(100)
    asked = {s.destination for s in ctx.sent(api.FETCH)}
    assert asked - {3}, f"only asked {asked}"
    assert ctx.sent(api.VOTE) == []


def test_a_probe_answered_only_with_errors_moves_on_to_the_next_voter():
    """A voter that no longer hosts the partition (it moved away) answers every fetch, with an
    error that names no leader. Those answers once counted as the probed voter being alive, so
    the probe stayed on it for good and never asked the voter that led (sim seed 8905)."""
    ctx = observer()
    ctx.advance(ctx.election_timeout_ms)
    first = ctx.sent(api.FETCH)[-1].destination
    asked = set()
    for _ in range(3 * ctx.fetch_timeout_ms // 100):
        sent = ctx.sent(api.FETCH)
        ctx.clear_sent()
        asked |= {s.destination for s in sent}
        for probe in sent:
            if probe.destination == first:
                ctx.respond(probe, ctx.fetch_response(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        ctx.advance(100)
    assert asked - {first}, f"the probe stayed on voter {first}"


def test_a_probe_told_the_leader_of_its_own_epoch_follows_it_even_outside_its_voter_set():
    """An observer whose voter set is old (a copy a move left behind) probes a voter, which names
    the leader of the same epoch, one its set lacks. It used to take that as "no leader" and
    probe the next voter, which named the same leader, forever (sim seed 3561)."""
    ctx = RaftTestContext.builder(local_id=4, voters=(1, 2, 3)).with_unknown_leader(5).build()
    ctx.advance(ctx.election_timeout_ms)
    _assert_follows_the_leader_it_is_told_of(ctx, ctx.sent(api.FETCH)[-1], 9, 5)


def _assert_follows_the_leader_it_is_told_of(ctx, probe, leader: int, epoch: int) -> None:
    """The probed voter answers NOT_LEADER_OR_FOLLOWER naming (leader, epoch): the observer
    follows that leader and fetches from it."""
    ctx.clear_sent()
    ctx.respond(probe, ctx.fetch_response(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, leader=(leader, epoch)))
    ctx.poll()
    ctx.assert_role("Follower", epoch)
    assert ctx.group.leader_id == leader
    ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1, to=leader)


def test_an_observer_told_its_leader_resigned_looks_for_the_next_leader():
    """EndQuorumEpoch reaches a node the leader still counted as a voter after the node's own
    log removed it (KIP-853). The next leader sends BeginQuorumEpoch only to its voters, so the
    observer must look for it: it once set no timer at all and waited forever (sim seed 20774)."""
    ctx = observer_following_3()
    assert ctx.deliver_end_quorum_epoch(5, leader_id=3, successors=[1, 2]).error_code == 0
    ctx.clear_sent()
    ctx.advance(ctx.election_timeout_ms)
    asked = {s.destination for s in ctx.sent(api.FETCH)}
    assert asked & {1, 2}, f"asked {asked or 'nobody'} after the resignation"
    assert ctx.sent(api.VOTE) == []
