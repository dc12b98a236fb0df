"""The one transition table (quorum/raft/transitions.py): illegal role changes raise."""
from __future__ import annotations

import itertools

import pytest

from kraftd.quorum.raft.transitions import ALLOWED, IllegalTransition, check

from .raft_context import RaftTestContext

ROLES = ("Unattached", "Voted", "Prospective", "Candidate", "Leader", "Follower", "Resigned")


@pytest.mark.parametrize("old, old_epoch, new, new_epoch", [
    ("Leader", 5, "Candidate", 6),       # a leader never stands again without stepping down
    ("Leader", 5, "Prospective", 5),
    ("Follower", 5, "Candidate", 6),     # no election without a pre-vote (KIP-996)
    ("Unattached", 5, "Candidate", 6),
    ("Unattached", 5, "Leader", 5),      # leadership only through a won vote
    ("Follower", 5, "Leader", 5),
    ("Prospective", 5, "Leader", 6),
    ("Prospective", 5, "Candidate", 7),  # a candidate bumps the epoch by exactly one
    ("Prospective", 5, "Candidate", 5),
    ("Candidate", 6, "Leader", 7),       # a candidate leads the epoch it stood in
    ("Follower", 5, "Follower", 5),      # one leader per epoch
    ("Leader", 5, "Follower", 5),
    ("Resigned", 5, "Leader", 5),
    ("Unattached", 5, "Unattached", 4),  # epochs never go back
    ("Voted", 5, "Voted", 5),            # one vote per epoch
    ("Follower", 5, "Unattached", 4),
])
def test_illegal_transitions_raise(old, old_epoch, new, new_epoch):
    with pytest.raises(IllegalTransition):
        check(old, old_epoch, new, new_epoch)


@pytest.mark.parametrize("old, old_epoch, new, new_epoch", [
    ("Unattached", 5, "Prospective", 5),
    ("Prospective", 5, "Candidate", 6),
    ("Candidate", 6, "Leader", 6),
    ("Leader", 6, "Resigned", 6),
    ("Resigned", 6, "Prospective", 6),
    ("Leader", 6, "Follower", 7),
    ("Follower", 6, "Unattached", 6),    # EndQuorumEpoch: the leader of this epoch resigned
    ("Prospective", 6, "Voted", 6),      # a lost pre-vote keeps the vote of this epoch
    ("Unattached", 6, "Voted", 6),
    ("Voted", 6, "Follower", 6),
])
def test_legal_transitions_pass(old, old_epoch, new, new_epoch):
    check(old, old_epoch, new, new_epoch)


def test_no_transition_ever_lowers_the_epoch_and_unknown_roles_are_refused():
    for old, new in itertools.product(ROLES, ROLES):
        with pytest.raises(IllegalTransition):
            check(old, 5, new, 4)
    for old, new in itertools.product(ROLES, ("Observer", "Dead")):
        with pytest.raises(IllegalTransition):
            check(old, 5, new, 5)


def test_leader_is_reached_only_from_candidate_and_candidate_only_from_prospective():
    assert {old for (old, new) in ALLOWED if new == "Leader"} == {"Candidate"}
    assert {old for (old, new) in ALLOWED if new == "Candidate"} == {"Prospective"}


def test_an_illegal_transition_in_a_group_raises_and_changes_nothing():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).build()
    epoch = ctx.win_election()
    before = ctx.persisted_state()
    with pytest.raises(IllegalTransition):
        ctx.group.become_candidate(ctx.now_ms)  # a leader may not start an election
    ctx.assert_elected_leader(epoch, 1)
    assert ctx.take_outbox().persist is None
    assert ctx.persisted_state() == before


def test_a_follower_cannot_skip_the_pre_vote():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(4, 2).build()
    with pytest.raises(IllegalTransition):
        ctx.group.become_candidate(ctx.now_ms)
    ctx.assert_elected_leader(4, 2)
