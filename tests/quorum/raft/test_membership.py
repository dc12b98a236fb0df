"""Voter changes on a group's leader (issue 25, KIP-853): one at a time, a new voter only once
caught up, the new set counting for the HW at once, a removed leader resigning once its
removal commits; and votes judged by (node id, directory id)."""
from __future__ import annotations

import uuid

import pytest

from kraftd.protocol import api
from kraftd.quorum.raft.membership import (DUPLICATE_VOTER, REQUEST_TIMED_OUT, VOTER_NOT_FOUND, propose_add_voter,
                                          propose_remove_voter)
from kraftd.quorum.raft.voter_set import Voter, VoterSet, voters_batch

from .raft_context import RaftTestContext

D4 = uuid.UUID(int=404)


def _leader(voters=(1, 2, 3)) -> RaftTestContext:
    ctx = RaftTestContext.builder(local_id=1, voters=voters).with_unknown_leader(4).append_to_log(3, 3).build()
    ctx.win_election()
    ctx.clear_sent()
    return ctx


def _commit(ctx: RaftTestContext, *followers: int) -> int:
    """The followers fetch the leader's whole log (twice: the second fetch reports it): the HW."""
    end = ctx.log.log_end_offset
    ctx.log.flush()
    for f in followers:
        ctx.deliver_fetch(f, end, ctx.epoch, directory=D4 if f == 4 else None)
    ctx.poll()
    return ctx.partition.high_watermark


def test_a_caught_up_observer_is_added_and_counts_for_the_hw_at_once():
    ctx = _leader()
    ctx.other_nodes.add(4)
    group = ctx.group
    assert _commit(ctx, 2) == ctx.log.log_end_offset  # the epoch has committed something
    assert propose_add_voter(group, Voter(4, D4), ctx.now_ms) == (REQUEST_TIMED_OUT, -1)  # never fetched
    ctx.deliver_fetch(4, 0, 0, directory=D4)
    assert propose_add_voter(group, Voter(4, D4), ctx.now_ms)[0] == REQUEST_TIMED_OUT  # behind the HW
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=uuid.UUID(int=999))
    assert propose_add_voter(group, Voter(4, D4), ctx.now_ms)[0] == REQUEST_TIMED_OUT  # another directory
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    error, offset = propose_add_voter(group, Voter(4, D4), ctx.now_ms)
    assert error == 0 and offset == ctx.log.log_end_offset - 1
    assert group.voters == (1, 2, 3, 4) and group.log_voters.offset() == offset
    assert group.voter_set.get(4).directory_id == D4
    # One change at a time: the record has not committed.
    assert propose_remove_voter(group, 4, D4, ctx.now_ms) == (REQUEST_TIMED_OUT, -1)
    # Four voters: 2 of them (1 and 2) are no longer a majority; 1, 2 and 4 are.
    end = ctx.log.log_end_offset
    ctx.deliver_fetch(2, end, ctx.epoch)
    ctx.poll()
    assert ctx.partition.high_watermark < end
    ctx.deliver_fetch(4, end, ctx.epoch, directory=D4)
    ctx.poll()
    assert ctx.partition.high_watermark == end
    assert propose_add_voter(group, Voter(4, D4), ctx.now_ms) == (DUPLICATE_VOTER, -1)


def test_no_change_before_the_epoch_commits():
    ctx = _leader()
    assert ctx.partition.high_watermark <= ctx.group.role.epoch_start_offset
    assert propose_remove_voter(ctx.group, 3, None, ctx.now_ms)[0] in (REQUEST_TIMED_OUT, VOTER_NOT_FOUND)


def test_a_static_voter_is_removed_by_id_or_by_the_directory_its_fetches_say():
    """A voter of the configured set has no directory on record: any directory of its node is
    it (a partition move names it by id alone; RemoveRaftVoter's handler refuses a nil
    directory itself)."""
    ctx = _leader()
    _commit(ctx, 2)
    error, _ = propose_remove_voter(ctx.group, 3, uuid.UUID(int=303), ctx.now_ms)
    assert error == 0 and ctx.group.voters == (1, 2)
    ctx = _leader()
    _commit(ctx, 2)
    error, _ = propose_remove_voter(ctx.group, 3, None, ctx.now_ms)
    assert error == 0 and ctx.group.voters == (1, 2)


def test_a_leader_that_removes_itself_resigns_once_the_removal_commits():
    ctx = _leader()
    _commit(ctx, 2, 3)
    group = ctx.group
    error, offset = propose_remove_voter(group, 1, ctx.node.replication.directory_id, ctx.now_ms)
    assert error == 0 and group.voters == (2, 3)
    assert group.is_leader  # it leads until the removal commits, and does not count itself
    end = ctx.log.log_end_offset
    ctx.deliver_fetch(2, end, ctx.epoch)
    ctx.poll()
    assert ctx.partition.high_watermark < end  # 1 is no voter: 2 alone is not a majority of {2, 3}
    ctx.clear_sent()
    ctx.deliver_fetch(3, end, ctx.epoch)
    ctx.poll()
    assert ctx.partition.high_watermark == end
    assert not group.is_leader and ctx.role == "Resigned"
    assert {s.destination for s in ctx.sent(api.END_QUORUM_EPOCH)} == {2, 3}


def test_a_follower_takes_the_set_from_its_log_and_loses_it_to_a_truncation():
    ctx = RaftTestContext.builder(local_id=2, voters=(1, 2, 3)).with_elected_leader(4, 1).append_to_log(3, 3).build()
    group = ctx.group
    new = VoterSet((Voter(1, uuid.UUID(int=101)), Voter(2, group.env.directory_id), Voter(3, uuid.UUID(int=103)),
                    Voter(4, D4)))
    batch = voters_batch(new, 4, ctx.now_ms)
    from kraftd.protocol.records import patch_base_offset
    patch_base_offset(batch, 0, ctx.log.log_end_offset)
    end = ctx.log.log_end_offset
    ctx.log.append_as_follower(batch)
    assert group.voters == (1, 2, 3, 4) and group.is_voter
    ctx.log.truncate_to(end)
    assert group.voters == (1, 2, 3) and group.voter_set == group.log_voters.static


@pytest.mark.parametrize("voter_directory, candidate_directory, granted, error", [
    (None, None, True, 0),
    (uuid.UUID(int=777), None, False, 125),  # asks another directory of this node: INVALID_VOTER_KEY
])
def test_a_vote_request_for_another_directory_of_this_node_is_refused(voter_directory, candidate_directory,
                                                                      granted, error):
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).build()
    request = ctx.vote_request(5, 2, 0, 0)
    p = request.topics[0].partitions[0]
    if voter_directory is not None:
        p.voter_directory_id = voter_directory
    answer = ctx.deliver_request(request, api.VOTE, 2, source=2).topics[0].partitions[0]
    assert (answer.vote_granted, answer.error_code) == (granted, error)


def test_a_candidate_outside_our_set_is_judged_by_its_log():
    """Raft's rule for membership changes: a newer set we have not fetched may hold the candidate,
    so only its log decides (a replaced disk's empty log is refused). Refusing every candidate
    outside our set left a quorum that had re-keyed a replaced disk leaderless (sim seed 4251)."""
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).append_to_log(3, 3).build()
    group = ctx.group
    voters = VoterSet((Voter(1, group.env.directory_id), Voter(2, uuid.UUID(int=202)), Voter(3, uuid.UUID(int=303))))
    from kraftd.protocol.records import patch_base_offset
    batch = voters_batch(voters, 4, ctx.now_ms)
    patch_base_offset(batch, 0, ctx.log.log_end_offset)
    ctx.log.append_as_follower(batch)
    empty = ctx.vote_request(5, 2, 0, 0)
    empty.topics[0].partitions[0].replica_directory_id = uuid.UUID(int=999)  # node 2 on a new, empty disk
    assert not ctx.deliver_request(empty, api.VOTE, 2, source=2).topics[0].partitions[0].vote_granted
    caught_up = ctx.vote_request(5, 2, *group.last_log_id())
    caught_up.topics[0].partitions[0].replica_directory_id = uuid.UUID(int=999)  # re-added in a set we lack
    assert ctx.deliver_request(caught_up, api.VOTE, 2, source=2).topics[0].partitions[0].vote_granted


def test_a_replica_outside_its_own_set_votes_when_the_candidate_names_its_directory():
    """Kafka's rule: the candidate's newer set holds us and we have not fetched it yet. Refusing
    left a metadata quorum leaderless: two of four voters could not vote, one only because its
    VotersRecord had not reached it (sim seed 2181). A request naming no directory (a static
    set) is still answered by a voter of our own set only."""
    ctx = RaftTestContext.builder(local_id=4, voters=(1, 2, 3)).with_unknown_leader(4).build()
    assert not ctx.group.is_voter
    static = ctx.vote_request(5, 2, 0, 0)
    assert not ctx.deliver_request(static, api.VOTE, 2, source=2).topics[0].partitions[0].vote_granted
    named = ctx.vote_request(5, 2, 0, 0)
    named.topics[0].partitions[0].voter_directory_id = ctx.group.env.directory_id
    answer = ctx.deliver_request(named, api.VOTE, 2, source=2).topics[0].partitions[0]
    assert (answer.vote_granted, answer.error_code) == (True, 0)
    assert ctx.group.state.voted_id == 2  # durable like any vote


def test_a_node_on_a_replaced_disk_is_not_its_voter_and_does_not_stand():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).build()
    group = ctx.group
    voters = VoterSet((Voter(1, uuid.UUID(int=111)), Voter(2, uuid.UUID(int=202)), Voter(3, uuid.UUID(int=303))))
    from kraftd.protocol.records import patch_base_offset
    batch = voters_batch(voters, 4, ctx.now_ms)
    patch_base_offset(batch, 0, ctx.log.log_end_offset)
    ctx.log.append_as_follower(batch)
    assert not group.is_voter and not group.may_stand
    ctx.clear_sent()
    ctx.advance(3 * ctx.election_timeout_ms)
    assert not ctx.sent(api.VOTE)


def test_a_removed_leader_looks_for_the_new_leader_after_resigning():
    """Found on real processes: a resigned leader that may not stand kept its past election
    deadline, and its timer fired in a loop (the node spun and never shut down)."""
    ctx = _leader()
    _commit(ctx, 2, 3)
    propose_remove_voter(ctx.group, 1, ctx.node.replication.directory_id, ctx.now_ms)
    _commit(ctx, 2, 3)
    assert ctx.role == "Resigned"
    ctx.clear_sent()
    ctx.advance(2 * ctx.election_timeout_ms)
    assert ctx.group.timer_ms > ctx.now_ms or ctx.group.timer_ms < 0  # no deadline left in the past
    ctx.advance(2 * ctx.election_timeout_ms)
    # It asks a voter who leads, without naming that voter the leader (it may not be).
    assert ctx.role == "Follower" and ctx.group.role.followed_leader in (2, 3) and ctx.group.leader_id == -1
    assert {s.destination for s in ctx.sent(api.FETCH)} <= {2, 3}
    assert not ctx.sent(api.VOTE)
