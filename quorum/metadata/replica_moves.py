"""A partition leader moves its group's voters to the replicas the image says (KIP-455 over
KIP-853): the Raft side of a reassignment.

The controller records a move (quorum/metadata/reassignments.py); the new replicas' nodes host
the partition as observers and fetch (quorum/hosting.py). Each time the leader reports, it
changes its group's voters one step toward the target, with the group's own change rules
(quorum/raft/membership.py: one change at a time, a new voter only once caught up):

1. add the target's replicas that are not voters, in the target's order;
2. then remove the voters not in the target, itself last (it resigns once that commits, and
   its EndQuorumEpoch hands the leadership to the voters that stay).

Adding first keeps the group at its replication factor or above throughout. The same steps undo
a cancelled move, whose target is the original replicas again.
"""
from __future__ import annotations

import logging

from ..raft.membership import change_blocked, propose_add_voter, propose_remove_voter
from ..raft.voter_set import Voter

log = logging.getLogger(__name__)


def move_voters(group, info, now_ms: int) -> bool:
    """One step of `group`'s voters toward `info`'s target; True if a change was appended."""
    target = info.target()
    voters = group.voter_set
    if set(voters.ids) == set(target) or change_blocked(group):
        return False
    env = group.env
    for node in target:
        if voters.get(node) is None:
            directory = env.follower_directory(node) or info.directory_of(node)
            if directory is None:
                return False  # not heard from yet
            error, _ = propose_add_voter(group, Voter(node, directory), now_ms)
            return not error  # (an observer not caught up yet: the next report tries again)
    leaving = sorted((v for v in voters.voters if v.node_id not in target),
                     key=lambda v: (v.node_id == group.node_id, v.node_id))
    if not leaving or len(voters.voters) - 1 < 1:
        return False
    voter = leaving[0]
    error, _ = propose_remove_voter(group, voter.node_id, voter.directory_id, now_ms)
    return not error
