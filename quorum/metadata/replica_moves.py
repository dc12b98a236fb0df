"""A partition leader moves its group's voters to the replicas the image says (KIP-455 over
KIP-853): the Raft side of a reassignment.

The controller records a move (quorum/metadata/reassignments.py); the new replicas' nodes host
the partition as observers and fetch (quorum/hosting.py). Each time the leader reports, it
changes its group's voters one step toward the target, with the group's own change rules
(quorum/raft/membership.py: one change at a time, a new voter only once caught up):

1. add the target's replicas that are not voters, in the target's order, each keyed by the
   directory its fetches come from;
2. then remove the voters not in the target, itself last (it resigns once that commits, and
   its EndQuorumEpoch hands the leadership to the voters that stay).

A voter whose node fetches from another directory than the one it was added with (its disk was
replaced) is removed first, and added again, with its new directory, once caught up.

Adding first keeps the group at its replication factor or above throughout. The same steps undo
a cancelled move, whose target is the original replicas again.
"""
from __future__ import annotations

from ..raft.membership import change_blocked, propose_add_voter, propose_remove_voter
from ..raft.voter_set import Voter

def move_voters(group, info, now_ms: int, adding_since: dict) -> bool:
    """One step of `group`'s voters toward `info`'s target; True if a change was appended.
    `adding_since` {(group key, node): ms}: when this leader first saw each node to add (its
    fetches count from then on; the caller keeps it across steps)."""
    target = info.target()
    progress = getattr(group.role, "progress", None)
    if progress is not None:
        # A node that holds no replica here forgets its progress: a copy it deleted must not
        # count as caught up if the node is added again.
        for node in [n for n in progress.observers if n not in info.replicas]:
            del progress.observers[node]
    voters = group.voter_set
    joining = [n for n in target if voters.get(n) is None]  # (a move's new replicas, or a cancel's)
    for key in [k for k in adding_since if k[0] == group.key and k[1] not in joining]:
        del adding_since[key]  # (added, or no longer to be: a later move counts afresh)
    for node in joining:
        adding_since.setdefault((group.key, node), now_ms)
    env = group.env
    replaced = [v for v in voters.voters if v.directory_id is not None and v.node_id != group.node_id
                and env.follower_directory(v.node_id) not in (None, v.directory_id)]
    if (set(voters.ids) == set(target) and not replaced) or change_blocked(group):
        return False
    if replaced:
        # A voter's disk was replaced (it fetches from another directory, KIP-853): its old
        # directory goes, and the step below adds the new one once it has caught up.
        error, _ = propose_remove_voter(group, replaced[0].node_id, replaced[0].directory_id, now_ms)
        return not error
    for node in target:
        if voters.get(node) is None:
            directory = env.follower_directory(node) or info.directory_of(node)
            if directory is None:
                return False  # not heard from yet
            since = adding_since[(group.key, node)]
            error, _ = propose_add_voter(group, Voter(node, directory), now_ms, fetched_since_ms=since)
            return not error  # (an observer not caught up yet: the next report tries again)
    leaving = sorted((v for v in voters.voters if v.node_id not in target),
                     key=lambda v: (v.node_id == group.node_id, v.node_id))
    if not leaving:
        return False
    voter = leaving[0]  # (the last voter is never removed: propose_remove_voter refuses)
    error, _ = propose_remove_voter(group, voter.node_id, voter.directory_id, now_ms)
    return not error


class VoterMoves:
    """Each report step, every led data group whose voters are not its image's replicas (a
    reassignment, or its cancel) takes one step toward them."""

    def __init__(self) -> None:
        self._adding_since: dict = {}  # (partition key, node) -> when we saw it to be added

    def step(self, image, led_groups, now_ms: int) -> None:
        for group in led_groups:
            partition = group.partition
            topic = image.topics.get(partition.topic_id)
            info = topic.partitions.get(partition.index) if topic is not None else None
            if info is not None:
                move_voters(group, info, now_ms, self._adding_since)
        if self._adding_since:
            led = {g.key for g in led_groups}
            self._adding_since = {k: t for k, t in self._adding_since.items() if k[0] in led}

