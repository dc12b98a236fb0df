"""Changing a group's voters on its leader (KIP-853), one voter at a time.

A change is a VotersRecord the leader appends; it is in force from its offset on, committed or
not, so the leader counts the new set for its HW at once. Kafka's rules:

- only a leader whose epoch has committed an entry may change the set (the fix to Raft's
  single-server change bug: a leader that just took over might still hold an uncommitted
  change of an older epoch);
- one change at a time: none while the newest VotersRecord is uncommitted;
- a new voter must be caught up: an observer, fetching from the directory it is added with,
  whose fetch offset has reached the HW;
- a leader that removes itself keeps leading until the removal commits, then resigns.

`propose_*` return (error code, offset of the VotersRecord): 0 and the offset when appended;
the caller answers once the HW passes that offset. An update (a voter's new listener) changes
no membership, but goes through the same one-change-at-a-time gate.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .voter_set import Voter, VoterSet

if TYPE_CHECKING:
    from .group import RaftGroup

log = logging.getLogger(__name__)

NONE = ErrorCode.NONE
NOT_LEADER_OR_FOLLOWER = ErrorCode.NOT_LEADER_OR_FOLLOWER
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT  # Kafka's answer while the leader cannot take a change yet
INVALID_REQUEST = ErrorCode.INVALID_REQUEST
DUPLICATE_VOTER = ErrorCode.DUPLICATE_VOTER
VOTER_NOT_FOUND = ErrorCode.VOTER_NOT_FOUND


def change_blocked(group: RaftGroup) -> int:
    """Why the leader cannot take a change now (0: it can)."""
    if not group.is_leader:
        return NOT_LEADER_OR_FOLLOWER
    role = group.role
    hw = group.partition.high_watermark
    if hw <= role.epoch_start_offset:
        return REQUEST_TIMED_OUT  # nothing of this epoch committed yet
    if group.log_voters.offset() >= hw and not group.env.bugs.two_voter_changes_at_once:
        return REQUEST_TIMED_OUT  # the last change has not committed
    return NONE


def propose_add_voter(group: RaftGroup, voter: Voter, now_ms: int, fetched_since_ms: int = -1) -> tuple[int, int]:
    """`fetched_since_ms`: the caught-up fetch must have come at or after then (a partition move:
    since the node was to be added, not from a copy it had before and has deleted since)."""
    blocked = change_blocked(group)
    if blocked:
        return blocked, -1
    voters = group.voter_set
    if voters.get(voter.node_id) is not None:
        return DUPLICATE_VOTER, -1
    if voter.directory_id is None:
        return INVALID_REQUEST, -1
    if not new_voter_caught_up(group, voter, fetched_since_ms) and not group.env.bugs.voter_counted_before_caught_up:
        return REQUEST_TIMED_OUT, -1
    return NONE, _append(group, voters.with_voter(voter), now_ms)


def propose_remove_voter(group: RaftGroup, node_id: int, directory_id, now_ms: int) -> tuple[int, int]:
    blocked = change_blocked(group)
    if blocked:
        return blocked, -1
    voters = group.voter_set
    if not voters.is_voter(node_id, directory_id):
        return VOTER_NOT_FOUND, -1
    if len(voters.voters) == 1:
        return INVALID_REQUEST, -1
    return NONE, _append(group, voters.without(node_id, directory_id), now_ms)


def propose_update_voter(group: RaftGroup, voter: Voter, now_ms: int) -> tuple[int, int]:
    """A voter's new listener (UpdateRaftVoter): the same voters, one endpoint changed. (0, -1)
    when the set holds that endpoint already."""
    blocked = change_blocked(group)
    if blocked:
        return blocked, -1
    voters = group.voter_set
    known = voters.get(voter.node_id)
    if voter.directory_id is None or known is None or known.directory_id != voter.directory_id:
        return VOTER_NOT_FOUND, -1
    if (known.host, known.port) == (voter.host, voter.port):
        return NONE, -1
    others = tuple(v for v in voters.voters if v.node_id != voter.node_id)
    return NONE, _append(group, VoterSet(others + (voter,)), now_ms)


def maybe_record_voters(group: RaftGroup, endpoints: dict, now_ms: int) -> bool:
    """kraft.version 1 without an operator's step: once the leader knows the directory of every
    configured voter (its own, and what each voter's fetches say), it writes them as the first
    VotersRecord. From then on a voter is (node id, directory id): a node restarted on a new,
    empty disk is not the voter it replaced, and cannot vote until it is added again."""
    if group.log_voters.offset() >= 0 or change_blocked(group):
        return False
    voters = []
    for v in group.log_voters.static.voters:
        directory = group.env.directory_id if v.node_id == group.node_id else group.env.follower_directory(v.node_id)
        if directory is None:
            return False
        host, port = endpoints.get(v.node_id, ("", 0))
        voters.append(Voter(v.node_id, directory, host, port))
    _append(group, VoterSet(tuple(voters)), now_ms)
    return True


def new_voter_caught_up(group: RaftGroup, voter: Voter, fetched_since_ms: int = -1) -> bool:
    """An observer fetching from `voter`'s directory whose fetch offset reached our HW (in a
    fetch at or after `fetched_since_ms`)."""
    progress = group.role.progress
    p = progress.observers.get(voter.node_id)
    if p is None or group.env.follower_directory(voter.node_id) != voter.directory_id:
        return False
    # (an incremental session fetch that leaves the partition out says its position is unchanged)
    later = group.session_fetch_ms(voter.node_id)
    if max(p.last_fetch_ms, later) < fetched_since_ms:
        return False
    if fetched_since_ms >= 0 and p.prev_fetch_ms < fetched_since_ms and later <= p.last_fetch_ms:
        # One fetch since: it may come from a copy the node has deleted since, in flight when
        # we saw the move back (sim seed 5815). A node's fetches come one at a time, and the
        # next one names its new copy's position or forgets the partition.
        return False
    return p.end_offset >= group.partition.high_watermark


def _append(group: RaftGroup, new_set, now_ms: int) -> int:
    offset = group.env.append_voters(group, new_set, now_ms)
    log.info("%s-%d: voters %s from offset %d (leader %d, epoch %d)", *group.key, list(new_set.ids), offset,
             group.node_id, group.epoch)
    group.role.voters_changed(group, now_ms)
    return offset
